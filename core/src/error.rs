//! Status codes (UCC's, with UCC's values) and the one error type of ferrocoll.

use std::fmt;

/// A UCC status code, with the numeric values of `ucc_status_t`.
///
/// `Ok`, `InProgress` and `OperationInitialized` are states, not errors; every
/// other variant is the status of an [`Error`].
#[repr(i32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Status {
    /// The operation completed successfully (`UCC_OK`).
    Ok = 0,
    /// The operation is posted and in progress (`UCC_INPROGRESS`).
    InProgress = 1,
    /// The operation is initialized but not posted (`UCC_OPERATION_INITIALIZED`).
    OperationInitialized = 2,
    /// Not supported by this component or for these arguments (`UCC_ERR_NOT_SUPPORTED`).
    NotSupported = -1,
    /// Not implemented (`UCC_ERR_NOT_IMPLEMENTED`).
    NotImplemented = -2,
    /// An argument is invalid (`UCC_ERR_INVALID_PARAM`).
    InvalidParam = -3,
    /// Out of memory (`UCC_ERR_NO_MEMORY`).
    NoMemory = -4,
    /// A resource (device, library, segment, peer) is unavailable (`UCC_ERR_NO_RESOURCE`).
    NoResource = -5,
    /// General-purpose error without a more specific code (`UCC_ERR_NO_MESSAGE`).
    NoMessage = -6,
    /// Something looked up does not exist (`UCC_ERR_NOT_FOUND`).
    NotFound = -7,
    /// The operation did not complete in time (`UCC_ERR_TIMED_OUT`).
    TimedOut = -8,
    /// An I/O or transport failure, including a dead peer (ferrocoll's `-9`).
    IoError = -9,
}

impl Status {
    /// Every status, in code order from `Ok` down.
    pub const ALL: [Status; 12] = [
        Status::Ok,
        Status::InProgress,
        Status::OperationInitialized,
        Status::NotSupported,
        Status::NotImplemented,
        Status::InvalidParam,
        Status::NoMemory,
        Status::NoResource,
        Status::NoMessage,
        Status::NotFound,
        Status::TimedOut,
        Status::IoError,
    ];

    /// The status whose [`Status::code`] is `code`, if any.
    pub fn from_code(code: i32) -> Option<Status> {
        Status::ALL.into_iter().find(|s| s.code() == code)
    }

    /// The numeric value, as in `ucc_status_t`.
    pub fn code(self) -> i32 {
        self as i32
    }

    /// True for `Ok`, `InProgress` and `OperationInitialized`.
    pub fn is_ok_or_pending(self) -> bool {
        self.code() >= 0
    }

    /// UCC's text for this status (`ucc_status_string`).
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "Success",
            Status::InProgress => "Operation in progress",
            Status::OperationInitialized => "Operation initialized",
            Status::NotSupported => "Operation is not supported",
            Status::NotImplemented => "Not implemented",
            Status::InvalidParam => "Invalid parameter",
            Status::NoMemory => "Out of memory",
            Status::NoResource => "Resources are not available for the operation",
            Status::NoMessage => "Unhandled error",
            Status::NotFound => "Not found",
            Status::TimedOut => "Timeout expired",
            Status::IoError => "Input/output error",
        }
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The error of every fallible ferrocoll call: a [`Status`] and a message
/// that names the offending value ("count 7 is not divisible by team size 4").
///
/// One pointer wide: the status, message and source lie in a box made when
/// the error is. A `Result<(), Error>` then fits a register, and every `?`
/// on the path of a small collective, which succeeds, tests one word
/// instead of writing and reading a 48-byte value through memory (~40
/// instructions of a small reduction alone, BENCHMARKS.md fifteenth round).
#[derive(thiserror::Error)]
#[error(transparent)]
pub struct Error(Box<Inner>);

/// What an [`Error`] says.
#[derive(Debug, thiserror::Error)]
#[error("{status}: {context}")]
struct Inner {
    status: Status,
    context: String,
    #[source]
    source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
}

/// As the fields were `Error`'s own: `Error { status, context, source }`.
impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Error")
            .field("status", &self.0.status)
            .field("context", &self.0.context)
            .field("source", &self.0.source)
            .finish()
    }
}

/// `Result<T, ferrocoll_core::Error>`.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// An error with the given status and message.
    ///
    /// `status` should be an error status; a non-error status is kept as it
    /// is so that the message is not lost, but callers never construct one.
    pub fn new(status: Status, context: impl Into<String>) -> Self {
        Error(Box::new(Inner { status, context: context.into(), source: None }))
    }

    /// Attach the lower-level cause.
    pub fn with_source(mut self, source: impl std::error::Error + Send + Sync + 'static) -> Self {
        self.0.source = Some(Box::new(source));
        self
    }

    /// `NotSupported` with a message.
    pub fn not_supported(context: impl Into<String>) -> Self {
        Self::new(Status::NotSupported, context)
    }
    /// `NotImplemented` with a message.
    pub fn not_implemented(context: impl Into<String>) -> Self {
        Self::new(Status::NotImplemented, context)
    }
    /// `InvalidParam` with a message.
    pub fn invalid_param(context: impl Into<String>) -> Self {
        Self::new(Status::InvalidParam, context)
    }
    /// `NoMemory` with a message.
    pub fn no_memory(context: impl Into<String>) -> Self {
        Self::new(Status::NoMemory, context)
    }
    /// `NoResource` with a message.
    pub fn no_resource(context: impl Into<String>) -> Self {
        Self::new(Status::NoResource, context)
    }
    /// `NotFound` with a message.
    pub fn not_found(context: impl Into<String>) -> Self {
        Self::new(Status::NotFound, context)
    }
    /// `TimedOut` with a message.
    pub fn timed_out(context: impl Into<String>) -> Self {
        Self::new(Status::TimedOut, context)
    }
    /// `IoError` with a message.
    pub fn io(context: impl Into<String>) -> Self {
        Self::new(Status::IoError, context)
    }
    /// `NoMessage`: a broken internal invariant, reported instead of a panic.
    pub fn internal(context: impl Into<String>) -> Self {
        Self::new(Status::NoMessage, format!("internal error: {}", context.into()))
    }

    /// The status code.
    pub fn status(&self) -> Status {
        self.0.status
    }

    /// The message, without the status text.
    pub fn context(&self) -> &str {
        &self.0.context
    }

    /// The same error with `prefix: ` put before its message (to say where it happened).
    pub fn prefixed(mut self, prefix: impl fmt::Display) -> Self {
        self.0.context = format!("{prefix}: {}", self.0.context);
        self
    }

    /// A copy for reporting the same failure to several waiters (the source
    /// is kept as text, since sources need not be `Clone`).
    pub fn duplicate(&self) -> Self {
        let context = match &self.0.source {
            Some(s) => format!("{} ({s})", self.0.context),
            None => self.0.context.clone(),
        };
        Error::new(self.0.status, context)
    }
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        let context = e.to_string();
        Error::new(Status::IoError, context).with_source(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_status_is_listed_once_and_found_by_its_code() {
        for (i, s) in Status::ALL.iter().enumerate() {
            assert_eq!(Status::from_code(s.code()), Some(*s));
            assert!(Status::ALL[..i].iter().all(|t| t.code() != s.code()), "{s:?} listed twice");
        }
        assert_eq!(Status::ALL.len(), (Status::OperationInitialized.code() - Status::IoError.code() + 1) as usize);
        assert_eq!(Status::from_code(-10), None);
    }

    #[test]
    fn status_values_are_ucc_values() {
        assert_eq!(Status::Ok.code(), 0);
        assert_eq!(Status::InProgress.code(), 1);
        assert_eq!(Status::OperationInitialized.code(), 2);
        assert_eq!(Status::NotSupported.code(), -1);
        assert_eq!(Status::InvalidParam.code(), -3);
        assert_eq!(Status::NotFound.code(), -7);
        assert_eq!(Status::TimedOut.code(), -8);
    }

    #[test]
    fn a_result_of_nothing_is_one_word_and_keeps_its_source() {
        assert_eq!(std::mem::size_of::<Result<()>>(), std::mem::size_of::<usize>());
        let e = Error::from(std::io::Error::new(std::io::ErrorKind::BrokenPipe, "peer went away"));
        assert_eq!(e.status(), Status::IoError);
        let source = std::error::Error::source(&e).map(|s| s.to_string());
        assert_eq!(source.as_deref(), Some("peer went away"));
        assert_eq!(e.duplicate().context(), "peer went away (peer went away)");
        assert!(format!("{e:?}").starts_with("Error { status: IoError, context: \"peer went away\""));
    }

    #[test]
    fn display_names_status_and_value() {
        let e = Error::invalid_param("root 5 is not below team size 4");
        assert_eq!(e.status(), Status::InvalidParam);
        assert_eq!(e.to_string(), "Invalid parameter: root 5 is not below team size 4");
        assert_eq!(e.prefixed("allreduce").context(), "allreduce: root 5 is not below team size 4");
    }
}
