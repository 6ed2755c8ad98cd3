//! Reductions on the device: the kernels of `ferrocoll-kernels`, loaded once
//! per device, launched with `cuLaunchKernel` (through `ferrocoll-cuda`).
//!
//! One launch folds at most [`MAX_SOURCES`] sources. More are reduced in
//! rounds: `dst = op(srcs[0..8])`, then `dst = op(dst, next 7)`, and so on;
//! an average is divided only in the last round. Narrow floats (f16, bf16,
//! float8) are therefore rounded to their type between rounds, so beyond 8
//! sources the result may differ from the host's one rounding by a few ulps.

use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::Mutex;

use ferrocoll_core::backend::ReduceSpec;
use ferrocoll_core::{Error, MemRef, MemType, ReduceOp, Result};
use ferrocoll_cuda::{Function, Module, Stream};
use ferrocoll_kernels::{MAX_SOURCES, ReduceArgs};

use super::device::{Device, Devices};
use super::query::query;

/// The kernels' module in one device's primary context, and the entry points looked up so far.
pub(crate) struct Kernels {
    module: Module,
    functions: Mutex<HashMap<&'static str, Function>>,
}

impl Kernels {
    /// Compile (or take from the cache) the PTX for the device's compute
    /// capability and load it into the device's primary context.
    fn load(device: &Device) -> Result<Kernels> {
        let (ordinal, (major, minor)) = (device.cuda.ordinal(), device.cuda.compute_capability());
        let ptx = ferrocoll_kernels::ptx_for_arch(major, minor)
            .map_err(|e| e.prefixed(format!("kernels for CUDA device {ordinal} (sm_{major}{minor})")))?;
        let _bound = device.cuda.bind()?;
        let module = Module::load_ptx(&ptx)
            .map_err(|e| e.prefixed(format!("loading the kernels on CUDA device {ordinal} (sm_{major}{minor})")))?;
        Ok(Kernels { module, functions: Mutex::new(HashMap::new()) })
    }

    /// The entry point `name` (the device's context must be current).
    fn function(&self, name: &'static str) -> Result<Function> {
        let mut map = self.functions.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(f) = map.get(name) {
            return Ok(*f);
        }
        let f = self.module.function(name).map_err(|e| e.prefixed(format!("kernel {name}")))?;
        map.insert(name, f);
        Ok(f)
    }
}

/// The loaded kernels of `device` (loading them on first use; a failure is kept and repeated).
fn kernels(device: &Device) -> Result<&Kernels> {
    device.kernels.get_or_init(|| Kernels::load(device))
}

fn check_operand(what: &str, m: &MemRef) -> Result<()> {
    match m.mem_type() {
        MemType::Cuda | MemType::CudaManaged => Ok(()),
        other => Err(Error::invalid_param(format!(
            "CUDA memory component given {other} memory for the {what} of a device reduction"
        ))),
    }
}

/// Check a reduction's operands; the byte length of each operand.
fn validate(dst: &MemRef, srcs: &[MemRef], spec: &ReduceSpec) -> Result<usize> {
    if srcs.is_empty() {
        return Err(Error::invalid_param(format!(
            "reduction {} on {} needs at least one source, got none",
            spec.op, spec.dtype
        )));
    }
    spec.op.check_device_dtype(spec.dtype)?;
    if spec.op == ReduceOp::Avg && spec.avg_divisor == Some(0) {
        return Err(Error::invalid_param(format!("avg on {} with divisor 0", spec.dtype)));
    }
    let bytes = spec.bytes().ok_or_else(|| {
        Error::invalid_param(format!(
            "count {} of {} for {} overflows the address space",
            spec.count, spec.dtype, spec.op
        ))
    })?;
    check_operand("destination", dst)?;
    for (i, s) in srcs.iter().enumerate() {
        check_operand(&format!("source {i}"), s)?;
    }
    let wrong = |name: String, len: usize| {
        Error::invalid_param(format!(
            "{name} has {len} bytes but {} {} elements for {} need {bytes}",
            spec.count, spec.dtype, spec.op
        ))
    };
    if dst.len() != bytes {
        return Err(wrong("destination".into(), dst.len()));
    }
    if let Some((i, s)) = srcs.iter().enumerate().find(|(_, s)| s.len() != bytes) {
        return Err(wrong(format!("source {i}"), s.len()));
    }
    let in_place = srcs[0].addr() == dst.addr();
    let skip = usize::from(in_place);
    if let Some(i) = srcs.iter().skip(skip).position(|s| s.overlaps(dst)) {
        return Err(Error::internal(format!(
            "reduce source {} overlaps the destination ({} bytes at {:p}); only source 0 may be the destination itself",
            i + skip,
            dst.len(),
            dst.addr()
        )));
    }
    Ok(bytes)
}

/// `dst = op(srcs...)` on the device that holds `dst`, waited for.
pub(crate) fn reduce(devices: &Devices, dst: MemRef, srcs: &[MemRef], spec: &ReduceSpec) -> Result<()> {
    validate(&dst, srcs, spec)?;
    if spec.count == 0 {
        return Ok(());
    }
    let name = ferrocoll_kernels::reduce_kernel(spec.dtype, spec.op)?;
    let divisor = match spec.avg_divisor.filter(|_| spec.op == ReduceOp::Avg) {
        None => 0,
        Some(d) => u32::try_from(d)
            .map_err(|_| Error::invalid_param(format!("avg divisor {d} does not fit the device kernels' 32 bits")))?,
    };
    let device = match query(devices, dst.addr()).device {
        Some(ordinal) => devices.device(ordinal)?,
        None => devices.current_device()?,
    };
    let kernels = kernels(device)?;
    let _bound = device.cuda.bind()?;
    let function = kernels.function(name)?;
    let elem = spec.op.element_size(spec.dtype);
    let (grid, block) = ferrocoll_kernels::launch_dims(spec.count as u64, elem);
    let stream = Stream::per_thread()?;
    for round in rounds(srcs.len()) {
        let mut args = ReduceArgs { dst: dst.addr() as u64, count: spec.count as u64, ..ReduceArgs::default() };
        let mut n = 0;
        if round.start > 0 {
            args.srcs[0] = dst.addr() as u64;
            n = 1;
        }
        for s in &srcs[round.clone()] {
            args.srcs[n] = s.addr() as u64;
            n += 1;
        }
        args.nsrcs = n as u32;
        args.avg_divisor = if round.end == srcs.len() { divisor } else { 0 };
        let mut params: [*mut c_void; 1] = [(&raw mut args).cast()];
        // SAFETY: function belongs to the module loaded in the device's
        // context, which is current (bound above); its one parameter is a
        // ReduceArgs by value, and params holds one pointer to a live
        // ReduceArgs (the driver copies it during the call). The addresses
        // are device-accessible ranges of `count` elements (validated above,
        // under the MemRef contract); only the first source may be dst.
        // Rounds after the first read dst, which the previous launch on the
        // same stream wrote: the stream orders them; the stream is
        // synchronised before this function returns (also when a launch
        // fails), before the caller uses the memory again.
        let launched = unsafe { function.launch(grid, block, &stream, &mut params) };
        if let Err(e) = launched {
            // Earlier rounds may still be queued: let them finish before the
            // caller, told the reduction failed, frees or reuses the operands.
            if let Err(sync) = stream.synchronize() {
                ferrocoll_core::log_warn!("{name} after a failed launch: {sync}");
            }
            return Err(e.prefixed(format!("{name} over {} elements", spec.count)));
        }
    }
    stream.synchronize().map_err(|e| e.prefixed(format!("{name} over {} elements", spec.count)))
}

/// The source ranges of each launch for `n` sources: the first round takes
/// up to [`MAX_SOURCES`], each later one up to `MAX_SOURCES - 1` (dst is its first operand).
pub(crate) fn rounds(n: usize) -> impl Iterator<Item = std::ops::Range<usize>> {
    let mut start = 0;
    std::iter::from_fn(move || {
        if start >= n {
            return None;
        }
        let take = if start == 0 { MAX_SOURCES } else { MAX_SOURCES - 1 };
        let end = (start + take).min(n);
        let r = start..end;
        start = end;
        Some(r)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_take_eight_then_seven() {
        assert_eq!(rounds(1).collect::<Vec<_>>(), vec![0..1]);
        assert_eq!(rounds(8).collect::<Vec<_>>(), vec![0..8]);
        assert_eq!(rounds(9).collect::<Vec<_>>(), vec![0..8, 8..9]);
        assert_eq!(rounds(15).collect::<Vec<_>>(), vec![0..8, 8..15]);
        assert_eq!(rounds(16).collect::<Vec<_>>(), vec![0..8, 8..15, 15..16]);
        assert_eq!(rounds(0).count(), 0);
    }

    #[test]
    fn operands_are_checked_before_any_driver_call() {
        let spec = |count| ReduceSpec {
            dtype: ferrocoll_core::DataType::Float32,
            op: ReduceOp::Sum,
            count,
            avg_divisor: None,
        };
        // SAFETY: the addresses are never dereferenced: validation fails first.
        let dev = |addr: usize, len| unsafe { MemRef::new(addr as *mut u8, len, MemType::Cuda) };
        // SAFETY: as above.
        let host = unsafe { MemRef::new(0x1000 as *mut u8, 16, MemType::Host) };
        let e = validate(&dev(0x1000, 16), &[], &spec(4)).unwrap_err();
        assert!(e.to_string().contains("at least one source"), "{e}");
        let e = validate(&dev(0x1000, 16), &[host], &spec(4)).unwrap_err();
        assert!(e.to_string().contains("host memory for the source 0"), "{e}");
        let e = validate(&dev(0x1000, 16), &[dev(0x2000, 12)], &spec(4)).unwrap_err();
        assert!(e.to_string().contains("source 0 has 12 bytes"), "{e}");
        let e = validate(&dev(0x1000, 16), &[dev(0x1000, 16), dev(0x1008, 16)], &spec(4)).unwrap_err();
        assert!(e.to_string().contains("source 1 overlaps"), "{e}");
        assert_eq!(validate(&dev(0x1000, 16), &[dev(0x1000, 16), dev(0x2000, 16)], &spec(4)).unwrap(), 16);
        let bad =
            ReduceSpec { dtype: ferrocoll_core::DataType::Float32, op: ReduceOp::Bxor, count: 4, avg_divisor: None };
        assert!(validate(&dev(0x1000, 16), &[dev(0x2000, 16)], &bad).is_err());
        let zero = ReduceSpec { op: ReduceOp::Avg, avg_divisor: Some(0), ..spec(4) };
        assert!(validate(&dev(0x1000, 16), &[dev(0x2000, 16)], &zero).unwrap_err().to_string().contains("divisor 0"));
    }
}
