//! # ferrocoll-ee
//!
//! Execution engines (UCC's EEs): where a collective's work is ordered with
//! the user's other work. UCC defines a CPU-thread engine and a CUDA-stream
//! engine; a collective can be posted on one (`triggered_post`) and reports
//! `CollectivePost` / `CollectiveComplete` events through it.
//!
//! This crate has the CPU engine's event queues ([`cpu::CpuEe`]): the
//! `set_event` / `get_event` / `ack_event` / `wait` calls of UCC. Triggered
//! post and the CUDA stream engine come with the GPU milestone.

#![forbid(unsafe_code)]

pub mod cpu;
pub mod event;

pub use cpu::CpuEe;
pub use event::{Event, EventType};
