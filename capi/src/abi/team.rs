//! Team parameters and attributes (`ucc_team_params_t`, `ucc_ep_map_t`, `ucc_team_attr_t`).

use std::ffi::c_void;

use super::{MemMapParams, OobColl};

/// `UCC_TEAM_PARAM_FIELD_ORDERING`.
pub const TEAM_PARAM_ORDERING: u64 = 1 << 0;
/// `UCC_TEAM_PARAM_FIELD_EP`.
pub const TEAM_PARAM_EP: u64 = 1 << 2;
/// `UCC_TEAM_PARAM_FIELD_EP_LIST`.
pub const TEAM_PARAM_EP_LIST: u64 = 1 << 3;
/// `UCC_TEAM_PARAM_FIELD_TEAM_SIZE`.
pub const TEAM_PARAM_TEAM_SIZE: u64 = 1 << 5;
/// `UCC_TEAM_PARAM_FIELD_SYNC_TYPE`.
pub const TEAM_PARAM_SYNC_TYPE: u64 = 1 << 6;
/// `UCC_TEAM_PARAM_FIELD_OOB`.
pub const TEAM_PARAM_OOB: u64 = 1 << 7;
/// `UCC_TEAM_PARAM_FIELD_EP_MAP`.
pub const TEAM_PARAM_EP_MAP: u64 = 1 << 10;

/// `UCC_TEAM_ATTR_FIELD_POST_ORDERING`.
pub const TEAM_ATTR_POST_ORDERING: u64 = 1 << 0;
/// `UCC_TEAM_ATTR_FIELD_OUTSTANDING_CALLS`.
pub const TEAM_ATTR_OUTSTANDING_CALLS: u64 = 1 << 1;
/// `UCC_TEAM_ATTR_FIELD_EP`.
pub const TEAM_ATTR_EP: u64 = 1 << 2;
/// `UCC_TEAM_ATTR_FIELD_EP_RANGE`.
pub const TEAM_ATTR_EP_RANGE: u64 = 1 << 3;
/// `UCC_TEAM_ATTR_FIELD_SYNC_TYPE`.
pub const TEAM_ATTR_SYNC_TYPE: u64 = 1 << 4;
/// `UCC_TEAM_ATTR_FIELD_MEM_PARAMS`.
pub const TEAM_ATTR_MEM_PARAMS: u64 = 1 << 5;
/// `UCC_TEAM_ATTR_FIELD_SIZE`.
pub const TEAM_ATTR_SIZE: u64 = 1 << 6;
/// `UCC_TEAM_ATTR_FIELD_EPS`.
pub const TEAM_ATTR_EPS: u64 = 1 << 7;

/// `UCC_EP_MAP_FULL`.
pub const EP_MAP_FULL: u32 = 1;
/// `UCC_EP_MAP_STRIDED`.
pub const EP_MAP_STRIDED: u32 = 2;
/// `UCC_EP_MAP_ARRAY`.
pub const EP_MAP_ARRAY: u32 = 3;
/// `UCC_EP_MAP_CB`.
pub const EP_MAP_CB: u32 = 4;

/// `UCC_COLLECTIVE_POST_ORDERED`.
pub const POST_ORDERED: u32 = 0;
/// `UCC_COLLECTIVE_EP_RANGE_CONTIG`.
pub const EP_RANGE_CONTIG: u32 = 0;

/// `ucc_team_p2p_conn_t` (never read: ferrocoll needs no point-to-point lookup).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct P2pConn {
    /// Callbacks and context, as five pointers.
    pub words: [*mut c_void; 5],
}

/// The union of `ucc_ep_map_t`, read according to its `type`.
#[repr(C)]
#[derive(Clone, Copy)]
pub union EpMapUnion {
    /// `UCC_EP_MAP_STRIDED`.
    pub strided: EpMapStrided,
    /// `UCC_EP_MAP_ARRAY`.
    pub array: EpMapArray,
    /// `UCC_EP_MAP_CB`.
    pub cb: EpMapCb,
}

/// `struct ucc_ep_map_strided`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct EpMapStrided {
    /// Endpoint of team rank 0.
    pub start: u64,
    /// Step between team ranks.
    pub stride: i64,
}

/// `struct ucc_ep_map_array`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct EpMapArray {
    /// `ep_num` endpoints of `elem_size` bytes.
    pub map: *mut c_void,
    /// 4 or 8.
    pub elem_size: usize,
}

/// `struct ucc_ep_map_cb`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct EpMapCb {
    /// Team rank → context endpoint.
    pub cb: Option<unsafe extern "C" fn(ep: u64, ctx: *mut c_void) -> u64>,
    /// Its argument.
    pub cb_ctx: *mut c_void,
}

/// `ucc_ep_map_t`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct EpMap {
    /// `ucc_ep_map_type_t`.
    pub map_type: u32,
    /// Team size.
    pub ep_num: u64,
    /// The map itself.
    pub u: EpMapUnion,
}

/// `ucc_team_params_t`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct TeamParams {
    /// Which fields are set.
    pub mask: u64,
    /// `enum ucc_team_flags`.
    pub flags: u64,
    /// `ucc_post_ordering_t`.
    pub ordering: u32,
    /// A hint.
    pub outstanding_colls: u64,
    /// This member's team rank.
    pub ep: u64,
    /// Context endpoints of the members (`team_size` of them).
    pub ep_list: *mut u64,
    /// `ucc_ep_range_type_t` (a hint).
    pub ep_range: u32,
    /// Number of members.
    pub team_size: u64,
    /// `ucc_coll_sync_type_t`.
    pub sync_type: u32,
    /// The members' own bootstrap.
    pub oob: OobColl,
    /// Point-to-point lookup (unused).
    pub p2p_conn: P2pConn,
    /// Memory to attach (unused).
    pub mem_params: MemMapParams,
    /// Team rank → context endpoint.
    pub ep_map: EpMap,
    /// The user's team id.
    pub id: u64,
}

/// `ucc_team_attr_t`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct TeamAttr {
    /// Which fields are asked for.
    pub mask: u64,
    /// `ucc_post_ordering_t`.
    pub ordering: u32,
    /// Collectives that may be outstanding (0: no limit).
    pub outstanding_colls: u64,
    /// This member's team rank.
    pub ep: u64,
    /// `ucc_ep_range_type_t`.
    pub ep_range: u32,
    /// `ucc_coll_sync_type_t`.
    pub sync_type: u32,
    /// Attached memory.
    pub mem_params: MemMapParams,
    /// Number of members.
    pub size: u32,
    /// Context endpoint of every member, in team-rank order.
    pub eps: *mut u64,
}

const _: () = {
    use std::mem::{offset_of, size_of};
    assert!(size_of::<P2pConn>() == 40);
    assert!(size_of::<EpMap>() == 32);
    assert!(offset_of!(EpMap, ep_num) == 8);
    assert!(offset_of!(EpMap, u) == 16);
    assert!(size_of::<TeamParams>() == 208);
    assert!(offset_of!(TeamParams, ordering) == 16);
    assert!(offset_of!(TeamParams, outstanding_colls) == 24);
    assert!(offset_of!(TeamParams, ep) == 32);
    assert!(offset_of!(TeamParams, ep_list) == 40);
    assert!(offset_of!(TeamParams, ep_range) == 48);
    assert!(offset_of!(TeamParams, team_size) == 56);
    assert!(offset_of!(TeamParams, sync_type) == 64);
    assert!(offset_of!(TeamParams, oob) == 72);
    assert!(offset_of!(TeamParams, p2p_conn) == 112);
    assert!(offset_of!(TeamParams, mem_params) == 152);
    assert!(offset_of!(TeamParams, ep_map) == 168);
    assert!(offset_of!(TeamParams, id) == 200);
    assert!(size_of::<TeamAttr>() == 72);
    assert!(offset_of!(TeamAttr, outstanding_colls) == 16);
    assert!(offset_of!(TeamAttr, ep) == 24);
    assert!(offset_of!(TeamAttr, ep_range) == 32);
    assert!(offset_of!(TeamAttr, sync_type) == 36);
    assert!(offset_of!(TeamAttr, mem_params) == 40);
    assert!(offset_of!(TeamAttr, size) == 56);
    assert!(offset_of!(TeamAttr, eps) == 64);
};
