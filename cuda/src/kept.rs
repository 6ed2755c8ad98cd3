//! Values made once per process and kept, with the error that prevented
//! them kept as well: [`Kept`] for one value, [`PerDevice`] for one per
//! device.
//!
//! Why keep failures: a probe that failed (no driver, a device that cannot
//! be opened, kernels that do not compile) fails the same way the next
//! time, and retrying it at every call would cost a `dlopen` or an NVRTC
//! run each time; callers get a copy of the first error instead
//! ([`Error::duplicate`]).

use std::sync::OnceLock;

use ferrocoll_core::{Error, Result};

/// A value made by the first successful or failed `init`, then kept.
///
/// ```
/// use ferrocoll_cuda::Kept;
/// static ANSWER: Kept<u32> = Kept::new();
/// assert_eq!(*ANSWER.get_or_init(|| Ok(42)).unwrap(), 42);
/// assert_eq!(*ANSWER.get_or_init(|| Ok(0)).unwrap(), 42, "made once");
/// ```
pub struct Kept<T>(OnceLock<Result<T, Error>>);

impl<T> Kept<T> {
    /// Nothing made yet.
    pub const fn new() -> Kept<T> {
        Kept(OnceLock::new())
    }

    /// The value, made by `init` on the first call (concurrent first
    /// callers wait for one `init`); a copy of `init`'s error if it failed.
    pub fn get_or_init(&self, init: impl FnOnce() -> Result<T>) -> Result<&T> {
        self.0.get_or_init(init).as_ref().map_err(Error::duplicate)
    }

    /// Whether the value was made successfully (never runs `init`).
    pub fn is_ok(&self) -> bool {
        matches!(self.0.get(), Some(Ok(_)))
    }
}

impl<T> Default for Kept<T> {
    fn default() -> Kept<T> {
        Kept::new()
    }
}

/// One [`Kept`] value per device ordinal, each made on first use, so that
/// nothing touches a device the process does not use.
pub struct PerDevice<T> {
    slots: Box<[Kept<T>]>,
}

impl<T> PerDevice<T> {
    /// Slots for devices `0..count`.
    pub fn new(count: usize) -> PerDevice<T> {
        PerDevice { slots: (0..count).map(|_| Kept::new()).collect() }
    }

    /// Number of devices.
    pub fn count(&self) -> usize {
        self.slots.len()
    }

    /// The value of device `ordinal`, made by `init` on first use;
    /// `InvalidParam` naming the ordinal when there is no such device.
    pub fn get_or_init(&self, ordinal: usize, init: impl FnOnce() -> Result<T>) -> Result<&T> {
        let slot = self.slots.get(ordinal).ok_or_else(|| {
            Error::invalid_param(format!("CUDA device {ordinal} does not exist ({} devices)", self.slots.len()))
        })?;
        slot.get_or_init(init)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferrocoll_core::Status;

    #[test]
    fn a_failure_is_kept_and_repeated() {
        let kept: Kept<u32> = Kept::new();
        assert!(!kept.is_ok());
        let e = kept.get_or_init(|| Err(Error::not_supported("no driver"))).unwrap_err();
        assert_eq!((e.status(), e.context()), (Status::NotSupported, "no driver"));
        let again = kept.get_or_init(|| Ok(1)).unwrap_err();
        assert_eq!(again.context(), "no driver", "init is not run again");
        assert!(!kept.is_ok());
    }

    #[test]
    fn devices_are_made_on_first_use_and_bounded() {
        let devices: PerDevice<usize> = PerDevice::new(2);
        assert_eq!(devices.count(), 2);
        assert_eq!(*devices.get_or_init(1, || Ok(10)).unwrap(), 10);
        assert_eq!(*devices.get_or_init(1, || Ok(11)).unwrap(), 10);
        let e = devices.get_or_init(2, || Ok(12)).unwrap_err();
        assert_eq!(e.status(), Status::InvalidParam);
        assert!(e.context().contains("CUDA device 2 does not exist (2 devices)"), "{e}");
    }
}
