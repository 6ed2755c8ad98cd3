//! # ferrocoll-mc
//!
//! Memory components (UCC's MCs) for ferrocoll.
#![deny(unsafe_op_in_unsafe_fn)]

pub mod fp8;
