//! UCC's executors (`ucc_ee_executor_*`): UCC's own perftest times them in
//! its `memcpy`, `reducedt` and `reducedt_strided` modes. The calls and
//! their structures are UCC-internal (`components/ec/ucc_ec.h`,
//! `ucc_ec_base.h`), so the layouts mirrored here are UCC's of that header
//! (size and offset checks below), not of the public `ucc.h`.
//!
//! ferrocoll offers the CPU thread executor (`UCC_EE_CPU_THREAD`): each task
//! runs at its post, on host memory, through the library's host memory
//! component (its reduction kernels and copies), and its test answers its
//! final status. A CUDA or ROCm stream executor is `UCC_ERR_NOT_SUPPORTED`,
//! as is a reduction scaled by `alpha` (`UCC_EEE_TASK_FLAG_REDUCE_WITH_ALPHA`,
//! which UCC's own algorithms use and its perftest does not). A buffer
//! that is not host memory is refused, named.

use std::ffi::c_void;
use std::sync::atomic::{AtomicPtr, AtomicU64};

use ferrocoll::core::backend::ReduceSpec;
use ferrocoll::{Error, MemRef, MemType, ReduceOp, Result};

use crate::abi::*;
use crate::guard::{ffi, non_null};
use crate::handle::{Handle, borrow, publish, retire};
use crate::lib_api::put;
use crate::types;

/// `UCC_EE_CPU_THREAD`.
const EE_CPU_THREAD: u32 = 1;
/// `UCC_EE_EXECUTOR_PARAM_FIELD_TYPE`.
const PARAM_FIELD_TYPE: u64 = 1;

/// `ucc_ee_executor_task_type_t`.
const TASK_REDUCE: u16 = 1;
const TASK_REDUCE_STRIDED: u16 = 1 << 1;
const TASK_REDUCE_MULTI_DST: u16 = 1 << 2;
const TASK_COPY: u16 = 1 << 3;
const TASK_COPY_MULTI: u16 = 1 << 4;

/// `enum ucc_eee_task_flags`.
const FLAG_REDUCE_WITH_ALPHA: u16 = 1;
const FLAG_REDUCE_SRCS_EXT: u16 = 1 << 1;

/// `UCC_EE_EXECUTOR_NUM_BUFS`, `UCC_EE_EXECUTOR_MULTI_OP_NUM_BUFS`.
const NUM_BUFS: usize = 9;
const MULTI_OP_NUM_BUFS: usize = 7;

/// `ucc_ee_executor_params_t`.
#[repr(C)]
pub struct ExecutorParams {
    mask: u64,
    ee_type: u32,
    task_types: u64,
}

/// `ucc_eee_task_reduce_t` (`srcs` holds `void **srcs_ext` with `FLAG_REDUCE_SRCS_EXT`).
#[repr(C)]
#[derive(Clone, Copy)]
struct Reduce {
    dst: *mut c_void,
    srcs: [*const c_void; NUM_BUFS],
    count: usize,
    alpha: f64,
    dt: u64,
    op: u32,
    n_srcs: u16,
}

/// `ucc_eee_task_reduce_strided_t`: sources `src1` and `src2 + i * stride`, `i < n_src2`.
#[repr(C)]
#[derive(Clone, Copy)]
struct ReduceStrided {
    dst: *mut c_void,
    src1: *const c_void,
    src2: *const c_void,
    stride: usize,
    count: usize,
    alpha: f64,
    dt: u64,
    op: u32,
    n_src2: u16,
}

/// `ucc_eee_task_reduce_multi_dst_t`: `dst[i] = op(src1[i], src2[i])`, `i < n_bufs`.
#[repr(C)]
#[derive(Clone, Copy)]
struct ReduceMultiDst {
    dst: [*mut c_void; MULTI_OP_NUM_BUFS],
    src1: [*const c_void; MULTI_OP_NUM_BUFS],
    src2: [*const c_void; MULTI_OP_NUM_BUFS],
    counts: [usize; MULTI_OP_NUM_BUFS],
    dt: u64,
    op: u32,
    n_bufs: u16,
}

/// `ucc_eee_task_copy_t`.
#[repr(C)]
#[derive(Clone, Copy)]
struct Copy {
    src: *const c_void,
    dst: *mut c_void,
    len: usize,
}

/// `ucc_eee_task_copy_multi_t`.
#[repr(C)]
#[derive(Clone, Copy)]
struct CopyMulti {
    src: [*const c_void; MULTI_OP_NUM_BUFS],
    dst: [*mut c_void; MULTI_OP_NUM_BUFS],
    counts: [usize; MULTI_OP_NUM_BUFS],
    num_vectors: usize,
}

#[repr(C)]
#[derive(Clone, Copy)]
union TaskUnion {
    reduce: Reduce,
    strided: ReduceStrided,
    multi_dst: ReduceMultiDst,
    copy: Copy,
    copy_multi: CopyMulti,
}

/// `ucc_ee_executor_task_args_t`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct TaskArgs {
    task_type: u16,
    flags: u16,
    u: TaskUnion,
}

/// What a `ucc_ee_executor_t *` points to: UCC's two public fields, then ours.
#[repr(C)]
pub struct Executor {
    ee_type: u32,
    ee_context: AtomicPtr<c_void>,
    magic: AtomicU64,
}

// SAFETY: `magic` is the AtomicU64 at its offset.
unsafe impl Handle for Executor {
    const WHAT: &'static str = "ucc_ee_executor_t *";
    const LIVE: u64 = 0xfe77_0c0c_0000_00e1;
    const MAGIC_OFFSET: usize = std::mem::offset_of!(Executor, magic);
    fn magic(&self) -> &AtomicU64 {
        &self.magic
    }
}

/// What a `ucc_ee_executor_task_t *` points to: UCC's layout (its executor,
/// a copy of its arguments, its status), then ours.
#[repr(C)]
pub struct Task {
    eee: AtomicPtr<Executor>,
    args: TaskArgs,
    status: UccStatus,
    magic: AtomicU64,
}

// SAFETY: the arguments are a copy the task only keeps (UCC's layout has
// them); nothing reads the pointers in them after the post.
unsafe impl Send for Task {}
// SAFETY: as for Send.
unsafe impl Sync for Task {}

// SAFETY: `magic` is the AtomicU64 at its offset.
unsafe impl Handle for Task {
    const WHAT: &'static str = "ucc_ee_executor_task_t *";
    const LIVE: u64 = 0xfe77_0c0c_0000_00e2;
    const MAGIC_OFFSET: usize = std::mem::offset_of!(Task, magic);
    fn magic(&self) -> &AtomicU64 {
        &self.magic
    }
}

/// `ucc_ee_executor_init`: a CPU thread executor.
///
/// # Safety
/// `params` a `ucc_ee_executor_params_t` with its mask set; `executor` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ucc_ee_executor_init(
    params: *const ExecutorParams,
    executor: *mut *mut Executor,
) -> UccStatus {
    ffi("ucc_ee_executor_init", || {
        non_null(params, "params")?;
        non_null(executor, "executor")?;
        // SAFETY: the caller's struct; the type is read only when masked.
        let (mask, ee_type) = unsafe {
            let p = params.read_unaligned();
            (p.mask, p.ee_type)
        };
        if mask & PARAM_FIELD_TYPE == 0 {
            return Err(Error::invalid_param("params.ee_type is not set (UCC_EE_EXECUTOR_PARAM_FIELD_TYPE)"));
        }
        if ee_type != EE_CPU_THREAD {
            return Err(Error::not_supported(format!(
                "params.ee_type {ee_type}: ferrocoll's executor is the CPU thread one (UCC_EE_CPU_THREAD)"
            )));
        }
        let e = Executor { ee_type, ee_context: AtomicPtr::default(), magic: AtomicU64::new(0) };
        // SAFETY: checked non-null.
        unsafe { put(executor, publish(e)) };
        Ok(UCC_OK)
    })
}

/// `ucc_ee_executor_status`: `UCC_OK` (a CPU executor is always ready).
///
/// # Safety
/// `executor` from `ucc_ee_executor_init`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ucc_ee_executor_status(executor: *const Executor) -> UccStatus {
    ffi("ucc_ee_executor_status", || {
        // SAFETY: see handle::borrow.
        unsafe { borrow(executor, "executor") }?;
        Ok(UCC_OK)
    })
}

/// `ucc_ee_executor_start`: keeps `ee_context` (a CPU executor has no use for it).
///
/// # Safety
/// `executor` from `ucc_ee_executor_init`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ucc_ee_executor_start(executor: *mut Executor, ee_context: *mut c_void) -> UccStatus {
    ffi("ucc_ee_executor_start", || {
        // SAFETY: see handle::borrow.
        let e = unsafe { borrow(executor.cast_const(), "executor") }?;
        e.ee_context.store(ee_context, std::sync::atomic::Ordering::Relaxed);
        Ok(UCC_OK)
    })
}

/// `ucc_ee_executor_stop`.
///
/// # Safety
/// `executor` from `ucc_ee_executor_init`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ucc_ee_executor_stop(executor: *mut Executor) -> UccStatus {
    ffi("ucc_ee_executor_stop", || {
        // SAFETY: see handle::borrow.
        unsafe { borrow(executor.cast_const(), "executor") }?;
        Ok(UCC_OK)
    })
}

/// `ucc_ee_executor_finalize`: the handle is dead after it.
///
/// # Safety
/// `executor` from `ucc_ee_executor_init`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ucc_ee_executor_finalize(executor: *mut Executor) -> UccStatus {
    ffi("ucc_ee_executor_finalize", || {
        // SAFETY: see handle::retire.
        unsafe { retire(executor, "executor") }?;
        Ok(UCC_OK)
    })
}

/// `ucc_ee_executor_task_post`: runs the task now; `*task` holds its status
/// for `ucc_ee_executor_task_test` until `ucc_ee_executor_task_finalize`.
/// A task that cannot run (bad arguments) fails here, with no task made.
///
/// # Safety
/// `executor` from `ucc_ee_executor_init`; `task_args` a
/// `ucc_ee_executor_task_args_t` whose buffers are valid host memory of
/// the sizes it gives; `task` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ucc_ee_executor_task_post(
    executor: *mut Executor,
    task_args: *const TaskArgs,
    task: *mut *mut Task,
) -> UccStatus {
    ffi("ucc_ee_executor_task_post", || {
        // SAFETY: see handle::borrow.
        unsafe { borrow(executor.cast_const(), "executor") }?;
        non_null(task_args, "task_args")?;
        non_null(task, "task")?;
        // SAFETY: the caller's struct.
        let args = unsafe { task_args.read_unaligned() };
        // SAFETY: forwarded to our caller.
        unsafe { run(&args) }?;
        let t = Task { eee: AtomicPtr::new(executor), args, status: UCC_OK, magic: AtomicU64::new(0) };
        // SAFETY: checked non-null.
        unsafe { put(task, publish(t)) };
        Ok(UCC_OK)
    })
}

/// `ucc_ee_executor_task_test`: the task's status (final at its post).
///
/// # Safety
/// `task` from `ucc_ee_executor_task_post`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ucc_ee_executor_task_test(task: *const Task) -> UccStatus {
    ffi("ucc_ee_executor_task_test", || {
        // SAFETY: see handle::borrow.
        let t = unsafe { borrow(task, "task") }?;
        Ok(t.status)
    })
}

/// `ucc_ee_executor_task_finalize`: the handle is dead after it.
///
/// # Safety
/// `task` from `ucc_ee_executor_task_post`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ucc_ee_executor_task_finalize(task: *mut Task) -> UccStatus {
    ffi("ucc_ee_executor_task_finalize", || {
        // SAFETY: see handle::retire.
        unsafe { retire(task, "task") }?;
        Ok(UCC_OK)
    })
}

/// Run one task on host memory.
///
/// # Safety
/// As [`ucc_ee_executor_task_post`] for `args`' buffers.
unsafe fn run(args: &TaskArgs) -> Result<()> {
    let reduces = matches!(args.task_type, TASK_REDUCE | TASK_REDUCE_STRIDED | TASK_REDUCE_MULTI_DST);
    if reduces && args.flags & FLAG_REDUCE_WITH_ALPHA != 0 {
        return Err(Error::not_supported(
            "task_args.flags UCC_EEE_TASK_FLAG_REDUCE_WITH_ALPHA: ferrocoll's executor does not scale a reduction",
        ));
    }
    // SAFETY: each arm reads the union member `task_type` names, as the
    // caller wrote it; the buffers are the caller's, as promised.
    unsafe {
        match args.task_type {
            TASK_REDUCE => {
                let r = args.u.reduce;
                let n = usize::from(r.n_srcs);
                let srcs: Vec<*const c_void> = if args.flags & FLAG_REDUCE_SRCS_EXT != 0 {
                    let ext = r.srcs[0].cast::<*const c_void>();
                    non_null(ext, "task_args.reduce.srcs_ext")?;
                    (0..n).map(|i| ext.add(i).read_unaligned()).collect()
                } else if n > NUM_BUFS {
                    return Err(Error::invalid_param(format!(
                        "task_args.reduce.n_srcs {n} exceeds the {NUM_BUFS} of srcs (set UCC_EEE_TASK_FLAG_REDUCE_SRCS_EXT \
                         for more)"
                    )));
                } else {
                    r.srcs[..n].to_vec()
                };
                reduce(r.dst, &srcs, r.count, r.dt, r.op, "task_args.reduce")
            }
            TASK_REDUCE_STRIDED => {
                let r = args.u.strided;
                let mut srcs = vec![r.src1];
                for i in 0..usize::from(r.n_src2) {
                    let at = i.checked_mul(r.stride).ok_or_else(|| {
                        Error::invalid_param(format!("task_args.reduce_strided.stride {} overflows", r.stride))
                    })?;
                    srcs.push((r.src2 as usize).checked_add(at).ok_or_else(|| {
                        Error::invalid_param(format!("task_args.reduce_strided.src2 + {at} overflows"))
                    })? as *const c_void);
                }
                reduce(r.dst, &srcs, r.count, r.dt, r.op, "task_args.reduce_strided")
            }
            TASK_REDUCE_MULTI_DST => {
                let r = args.u.multi_dst;
                let n = bounded(usize::from(r.n_bufs), "task_args.reduce_multi_dst.n_bufs")?;
                for i in 0..n {
                    let what = format!("task_args.reduce_multi_dst[{i}]");
                    reduce(r.dst[i], &[r.src1[i], r.src2[i]], r.counts[i], r.dt, r.op, &what)?;
                }
                Ok(())
            }
            TASK_COPY => {
                let c = args.u.copy;
                copy(c.dst, c.src, c.len, "task_args.copy")
            }
            TASK_COPY_MULTI => {
                let c = args.u.copy_multi;
                let n = bounded(c.num_vectors, "task_args.copy_multi.num_vectors")?;
                for i in 0..n {
                    copy(c.dst[i], c.src[i], c.counts[i], &format!("task_args.copy_multi[{i}]"))?;
                }
                Ok(())
            }
            t => Err(Error::invalid_param(format!("task_args.task_type {t} is not a UCC executor task type"))),
        }
    }
}

/// `n`, if a multi-buffer task may have that many buffers.
fn bounded(n: usize, what: &str) -> Result<usize> {
    if n > MULTI_OP_NUM_BUFS {
        return Err(Error::invalid_param(format!("{what} {n} exceeds {MULTI_OP_NUM_BUFS}")));
    }
    Ok(n)
}

/// `len` bytes at `p` as host memory, refused (named) when `p` is NULL
/// with bytes to touch, or is memory of another kind.
///
/// # Safety
/// `p` valid for `len` bytes, as the executor's caller promises.
unsafe fn host(p: *const c_void, len: usize, what: &str) -> Result<MemRef> {
    if len > 0 && p.is_null() {
        return Err(Error::invalid_param(format!("{what} is NULL with {len} bytes to touch")));
    }
    let found = crate::mc::resolve(p.cast());
    if len > 0 && found != MemType::Host {
        return Err(Error::not_supported(format!(
            "{what} = {p:p} is {found} memory: ferrocoll's executor is the CPU one (host memory only)"
        )));
    }
    // SAFETY: forwarded to our caller.
    Ok(unsafe { MemRef::new(p.cast_mut().cast(), len, MemType::Host) })
}

/// `dst = op(srcs...)` over `count` elements of UCC datatype `dt`. UCC's
/// executor reduces avg as sum (its collectives divide, by `alpha`).
///
/// # Safety
/// As [`host`], for each buffer.
unsafe fn reduce(dst: *mut c_void, srcs: &[*const c_void], count: usize, dt: u64, op: u32, what: &str) -> Result<()> {
    let dtype = types::datatype(dt, format_args!("{what}.dt"))?;
    let op = match types::reduce_op(op, format_args!("{what}.op"))? {
        ReduceOp::Avg => ReduceOp::Sum,
        o => o,
    };
    if srcs.is_empty() {
        return Err(Error::invalid_param(format!("{what} has no source")));
    }
    let bytes = count
        .checked_mul(op.element_size(dtype))
        .ok_or_else(|| Error::invalid_param(format!("{what}.count {count} of {dtype} overflows")))?;
    if bytes == 0 {
        return Ok(());
    }
    // SAFETY: forwarded to our caller.
    let d = unsafe { host(dst.cast_const(), bytes, &format!("{what}.dst")) }?;
    let s = srcs
        .iter()
        .enumerate()
        // SAFETY: forwarded to our caller.
        .map(|(i, &p)| unsafe { host(p, bytes, &format!("{what} source {i}")) })
        .collect::<Result<Vec<_>>>()?;
    let spec = ReduceSpec { dtype, op, count, avg_divisor: None };
    crate::mc::host_mc()?.reduce(d, &s, &spec).map_err(|e| e.prefixed(what))
}

/// Copy `len` bytes from `src` to `dst` (they may overlap).
///
/// # Safety
/// As [`host`], for both buffers.
unsafe fn copy(dst: *mut c_void, src: *const c_void, len: usize, what: &str) -> Result<()> {
    // SAFETY: forwarded to our caller.
    let d = unsafe { host(dst.cast_const(), len, &format!("{what}.dst")) }?;
    // SAFETY: forwarded to our caller.
    let s = unsafe { host(src, len, &format!("{what}.src")) }?;
    d.copy_host_from(&s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};

    /// The offsets and sizes of UCC's `ucc_ec_base.h` on LP64.
    #[test]
    fn layouts_are_uccs() {
        assert_eq!(size_of::<ExecutorParams>(), 24);
        assert_eq!(offset_of!(ExecutorParams, task_types), 16);
        assert_eq!((offset_of!(Reduce, count), offset_of!(Reduce, alpha), offset_of!(Reduce, dt)), (80, 88, 96));
        assert_eq!((offset_of!(Reduce, op), offset_of!(Reduce, n_srcs), size_of::<Reduce>()), (104, 108, 112));
        assert_eq!((offset_of!(ReduceStrided, dt), offset_of!(ReduceStrided, n_src2)), (48, 60));
        assert_eq!((offset_of!(ReduceMultiDst, counts), offset_of!(ReduceMultiDst, n_bufs)), (168, 236));
        assert_eq!(size_of::<ReduceMultiDst>(), 240);
        assert_eq!((offset_of!(CopyMulti, num_vectors), size_of::<Copy>()), (168, 24));
        assert_eq!((offset_of!(TaskArgs, u), size_of::<TaskArgs>()), (8, 248));
        assert_eq!((offset_of!(Task, args), offset_of!(Task, status)), (8, 256));
        assert_eq!(offset_of!(Executor, ee_context), 8);
    }
}
