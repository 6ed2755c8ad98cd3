//! UCC's raw enum values (datatype words, memory types, operations,
//! collective types) to ferrocoll's types, and back; every unknown value is
//! `InvalidParam` naming the field it came from.

use std::fmt::Display;

use ferrocoll::{CollType, DataType, Error, MemType, ReduceOp, Result};

/// `UCC_DATATYPE_SHIFT`: a predefined datatype's index sits above 3 flag bits.
const DT_SHIFT: u32 = 3;
/// `UCC_DATATYPE_GENERIC`.
const DT_GENERIC: u64 = 1;
/// `UCC_DT_PREDEFINED_LAST`: UCC's predefined types (ferrocoll's float8
/// extensions, 18 and 19, are not part of the C interface).
pub(crate) const DT_PREDEFINED: usize = 18;

/// A `ucc_datatype_t` word (`field` names where it came from).
pub(crate) fn datatype(word: u64, field: impl Display) -> Result<DataType> {
    if word & DT_GENERIC != 0 {
        return Err(Error::not_supported(format!(
            "{field} {word:#x} is a user-defined (generic) datatype, which ferrocoll does not support"
        )));
    }
    let index = word >> DT_SHIFT;
    if word & ((1 << DT_SHIFT) - 1) != 0 || index >= DT_PREDEFINED as u64 {
        return Err(Error::invalid_param(format!("{field} {word:#x} is not a UCC datatype")));
    }
    DataType::from_index(index as u8).map_err(|e| e.prefixed(field))
}

/// A `ucc_memory_type_t` (UNKNOWN included: ferrocoll resolves it).
pub(crate) fn mem_type(v: u32, field: impl Display) -> Result<MemType> {
    MemType::CONCRETE
        .iter()
        .chain(&[MemType::Unknown])
        .copied()
        .find(|m| *m as u32 == v)
        .ok_or_else(|| Error::invalid_param(format!("{field} {v} is not a UCC memory type")))
}

/// A `ucc_reduction_op_t`.
pub(crate) fn reduce_op(v: u32, field: impl Display) -> Result<ReduceOp> {
    let op = ReduceOp::ALL
        .get(v as usize)
        .copied()
        .ok_or_else(|| Error::invalid_param(format!("{field} {v} is not a UCC reduction")))?;
    if matches!(op, ReduceOp::Maxloc | ReduceOp::Minloc) {
        // ferrocoll reduces (value, index) pairs only when told the buffers
        // hold pairs; UCC has no datatype that says so.
        return Err(Error::not_supported(format!(
            "{field} {op}: UCC has no (value, index) pair datatype, so the C interface does not offer it"
        )));
    }
    Ok(op)
}

/// A `ucc_coll_type_t` (exactly one collective).
pub(crate) fn coll_type(v: u32, field: impl Display) -> Result<CollType> {
    CollType::ALL
        .iter()
        .copied()
        .find(|c| *c as u32 == v)
        .ok_or_else(|| Error::invalid_param(format!("{field} {v:#x} is not one UCC collective type")))
}

/// Every collective (the `ucc_coll_type_t` bits ferrocoll serves).
pub(crate) const ALL_COLLS: u64 = 0xffff;

/// Every reduction of the C interface, as `1 << op` bits (all but maxloc, minloc).
pub(crate) const ALL_OPS: u64 = ((1 << 13) - 1) & !((1 << ReduceOp::Maxloc as u32) | (1 << ReduceOp::Minloc as u32));

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn datatypes() {
        assert_eq!(datatype(11 << 3, "dt").unwrap(), DataType::Float32);
        assert_eq!(datatype(0, "dt").unwrap(), DataType::Int8);
        assert_eq!(datatype(17 << 3, "dt").unwrap(), DataType::Float128Complex);
        assert!(datatype(18 << 3, "src.info.datatype").unwrap_err().context().contains("src.info.datatype 0x90"));
        assert!(datatype((5 << 3) | 2, "dt").is_err());
        assert_eq!(datatype(0x7f00_0001, "dt").unwrap_err().status(), ferrocoll::Status::NotSupported);
        for (i, d) in DataType::ALL.iter().take(DT_PREDEFINED).enumerate() {
            assert_eq!(datatype((i as u64) << 3, "dt").unwrap(), *d);
        }
    }

    #[test]
    fn enums() {
        assert_eq!(mem_type(5, "m").unwrap(), MemType::Unknown);
        assert_eq!(mem_type(1, "m").unwrap(), MemType::Cuda);
        assert!(mem_type(6, "m").is_err());
        assert_eq!(reduce_op(12, "op").unwrap(), ReduceOp::Avg);
        assert!(reduce_op(13, "op").is_err());
        assert_eq!(reduce_op(10, "op").unwrap_err().status(), ferrocoll::Status::NotSupported);
        assert_eq!(coll_type(1 << 6, "c").unwrap(), CollType::Bcast);
        assert!(coll_type(3, "c").is_err());
        assert_eq!(ALL_OPS, 0x13ff);
    }
}
