//! `-m cuda` / `-m cuda_managed`: the collective runs on device buffers that
//! mirror the host ones. Inputs are prepared (and results checked) in host
//! memory as for `-m host`, and copied to and from the device outside the
//! timed region, so the times are those of the collective alone.

use std::sync::Arc;

use ferrocoll::core::backend::{Mc, Scratch};
use ferrocoll::{CollArgs, CollBuffer, Error, MemRef, MemType, Result};
use ferrocoll_mc::CudaMc;

use super::buffers::{AlignedBuf, SizeBuffers};

/// Device copies of one size's source and destination buffers.
pub struct DeviceMirror {
    mc: Arc<dyn Mc>,
    mem: MemType,
    src: Option<Scratch>,
    dst: Option<Scratch>,
}

impl DeviceMirror {
    /// Mirrors of `bufs` in `mem` memory; `None` for host memory. Without a
    /// CUDA driver or device this is the probe's `NotSupported` error.
    pub fn new(mem: MemType, bufs: &SizeBuffers) -> Result<Option<DeviceMirror>> {
        let mc: Arc<dyn Mc> = match mem {
            MemType::Host => return Ok(None),
            MemType::Cuda => Arc::new(CudaMc::probe()?),
            MemType::CudaManaged => Arc::new(CudaMc::probe()?.managed()),
            other => return Err(Error::not_supported(format!("-m {other}: ferrocoll-perftest runs on host or cuda"))),
        };
        let alloc = |b: &AlignedBuf| (!b.bytes().is_empty()).then(|| mc.alloc(b.bytes().len())).transpose();
        let (src, dst) = (alloc(&bufs.src)?, alloc(&bufs.dst)?);
        Ok(Some(DeviceMirror { mc, mem, src, dst }))
    }

    /// Copy the host buffers (inputs and poison) to the device.
    pub fn upload(&self, bufs: &SizeBuffers) -> Result<()> {
        for (dev, host) in [(&self.src, &bufs.src), (&self.dst, &bufs.dst)] {
            if let Some(dev) = dev {
                // SAFETY: `host` is borrowed for the whole (synchronous) copy.
                let from = unsafe { MemRef::from_slice(host.bytes()) };
                self.mc.copy(dev.mem(), from)?;
            }
        }
        Ok(())
    }

    /// Copy the device buffers back, for the check.
    pub fn download(&self, bufs: &mut SizeBuffers) -> Result<()> {
        for (dev, host) in [(&self.src, &mut bufs.src), (&self.dst, &mut bufs.dst)] {
            if let Some(dev) = dev {
                // SAFETY: `host` is borrowed mutably for the whole (synchronous) copy.
                let to = unsafe { MemRef::from_mut_slice(host.bytes_mut()) };
                self.mc.copy(to, dev.mem())?;
            }
        }
        Ok(())
    }

    /// Point `args` at the device buffers instead of the host ones.
    pub fn retarget(&self, args: &mut CollArgs) {
        for (buf, dev) in [(&mut args.src, &self.src), (&mut args.dst, &self.dst)] {
            let Some(dev) = dev else { continue };
            match buf {
                CollBuffer::Info(i) => {
                    i.buffer = dev.mem().addr();
                    i.mem_type = self.mem;
                }
                CollBuffer::InfoV(v) => {
                    v.buffer = dev.mem().addr();
                    v.mem_type = self.mem;
                }
                CollBuffer::None => {}
            }
        }
    }
}
