/*
 * ferrocoll's ucc.h against UCC's x86-64 ABI: sizes, member offsets and
 * enum values that programs built against UCC's headers rely on. Compiled
 * as C11 and as C++17 (PyTorch includes the header from C++); it fails to
 * compile if a number differs.
 *
 * The numbers are UCC's layout (UCC 1.3 and later; ucc_coll_args_t grew from
 * 184 to 200 bytes when the memory handles were appended).
 */
#include <stddef.h>
#include <ucc/api/ucc.h>

#ifdef __cplusplus
#define ASSERT(c) static_assert(c, #c)
#else
#define ASSERT(c) _Static_assert(c, #c)
#endif
#define OFF(t, m, o) ASSERT(offsetof(t, m) == (o))

/* status codes */
ASSERT(UCC_OK == 0 && UCC_INPROGRESS == 1 && UCC_OPERATION_INITIALIZED == 2);
ASSERT(UCC_ERR_NOT_SUPPORTED == -1 && UCC_ERR_INVALID_PARAM == -3 && UCC_ERR_NO_MESSAGE == -6);
ASSERT(UCC_ERR_NOT_FOUND == -7 && UCC_ERR_TIMED_OUT == -8 && UCC_ERR_LAST == -100);
ASSERT(sizeof(ucc_status_t) == 4);

/* vocabulary */
ASSERT(UCC_COLL_TYPE_ALLGATHER == 1 && UCC_COLL_TYPE_BCAST == 64 && UCC_COLL_TYPE_SCATTERV == 32768);
ASSERT(UCC_COLL_TYPE_LAST == 32769);
ASSERT(UCC_MEMORY_TYPE_CUDA_MANAGED == 2 && UCC_MEMORY_TYPE_UNKNOWN == 5);
ASSERT(UCC_DT_INT8 == 0 && UCC_DT_FLOAT32 == 88 && UCC_DT_BFLOAT16 == 104 && UCC_DT_FLOAT128_COMPLEX == 136);
ASSERT(UCC_OP_SUM == 0 && UCC_OP_AVG == 12 && UCC_OP_LAST == 13);
ASSERT(UCC_THREAD_MULTIPLE == 2);
ASSERT(UCC_EE_CUDA_STREAM == 0 && UCC_EE_CPU_THREAD == 1 && UCC_EE_ROCM_STREAM == 2 && UCC_EE_UNKNOWN == 3);
ASSERT(UCC_EVENT_COLLECTIVE_POST == 1 && UCC_EVENT_COLLECTIVE_COMPLETE == 2);
ASSERT(UCC_EVENT_COMPUTE_COMPLETE == 4 && UCC_EVENT_OVERFLOW == 8);
ASSERT(UCC_EP_MAP_FULL == 1 && UCC_EP_MAP_CB == 4);
ASSERT(UCC_COLL_ARGS_FLAG_IN_PLACE == 1 && UCC_COLL_ARGS_FLAG_PERSISTENT == 2);
ASSERT(UCC_COLL_ARGS_FLAG_TIMEOUT == 64 && UCC_COLL_ARGS_FLAG_MEM_MAPPED_BUFFERS == 128);
ASSERT(UCC_COLL_ARGS_FIELD_CB == 4 && UCC_COLL_ARGS_FIELD_ACTIVE_SET == 16);
ASSERT(UCC_COLL_ARGS_HINT_OPTIMIZE_OVERLAP_CPU == (1 << 24));
ASSERT(UCC_COLL_ARGS_HINT_OPTIMIZE_OVERLAP_GPU == (1 << 25));
ASSERT(UCC_COLL_ARGS_HINT_OPTIMIZE_LATENCY == (1 << 26));
ASSERT(UCC_COLL_ARGS_HINT_CONTIG_SRC_BUFFER == 16 && UCC_COLL_ARGS_HINT_CONTIG_DST_BUFFER == 32);
ASSERT(sizeof(ucc_coll_args_hints_t) == 4);
ASSERT(UCC_MEM_MAP_MODE_EXPORT == 0 && UCC_MEM_MAP_MODE_IMPORT == 1);
ASSERT(UCC_MEM_MAP_MODE_EXPORT_OFFLOAD == 2 && UCC_MEM_MAP_MODE_IMPORT_OFFLOAD == 3 && UCC_MEM_MAP_MODE_LAST == 4);
ASSERT(UCC_TEAM_PARAM_FIELD_OOB == 128 && UCC_TEAM_PARAM_FIELD_EP_MAP == 1024);
ASSERT(UCC_CONTEXT_PARAM_FIELD_OOB == 4 && UCC_LIB_PARAM_FIELD_THREAD_MODE == 1);
ASSERT(UCC_CONFIG_PRINT_CONFIG == 1 && UCC_CONFIG_PRINT_HEADER == 2 && UCC_CONFIG_PRINT_DOC == 4);

/* library */
ASSERT(sizeof(ucc_lib_params_t) == 40);
OFF(ucc_lib_params_t, thread_mode, 8);
OFF(ucc_lib_params_t, coll_types, 16);
OFF(ucc_lib_params_t, reduction_types, 24);
OFF(ucc_lib_params_t, sync_type, 32);
ASSERT(sizeof(ucc_lib_attr_t) == 40);
OFF(ucc_lib_attr_t, sync_type, 32);

/* context */
ASSERT(sizeof(ucc_oob_coll_t) == 40);
OFF(ucc_oob_coll_t, req_test, 8);
OFF(ucc_oob_coll_t, coll_info, 24);
OFF(ucc_oob_coll_t, n_oob_eps, 32);
OFF(ucc_oob_coll_t, oob_ep, 36);
ASSERT(sizeof(ucc_mem_map_t) == 16 && sizeof(ucc_mem_map_params_t) == 16);
ASSERT(sizeof(ucc_context_params_t) == 80);
OFF(ucc_context_params_t, type, 8);
OFF(ucc_context_params_t, sync_type, 12);
OFF(ucc_context_params_t, oob, 16);
OFF(ucc_context_params_t, ctx_id, 56);
OFF(ucc_context_params_t, mem_params, 64);
ASSERT(sizeof(ucc_context_attr_t) == 40);
OFF(ucc_context_attr_t, ctx_addr, 16);
OFF(ucc_context_attr_t, ctx_addr_len, 24);
OFF(ucc_context_attr_t, global_work_buffer_size, 32);

/* team */
ASSERT(sizeof(ucc_team_p2p_conn_t) == 40);
ASSERT(sizeof(ucc_ep_map_t) == 32);
OFF(ucc_ep_map_t, ep_num, 8);
OFF(ucc_ep_map_t, strided.start, 16);
OFF(ucc_ep_map_t, strided.stride, 24);
OFF(ucc_ep_map_t, array.map, 16);
OFF(ucc_ep_map_t, array.elem_size, 24);
OFF(ucc_ep_map_t, cb.cb, 16);
OFF(ucc_ep_map_t, cb.cb_ctx, 24);
ASSERT(sizeof(ucc_team_params_t) == 208);
OFF(ucc_team_params_t, flags, 8);
OFF(ucc_team_params_t, ordering, 16);
OFF(ucc_team_params_t, outstanding_colls, 24);
OFF(ucc_team_params_t, ep, 32);
OFF(ucc_team_params_t, ep_list, 40);
OFF(ucc_team_params_t, ep_range, 48);
OFF(ucc_team_params_t, team_size, 56);
OFF(ucc_team_params_t, sync_type, 64);
OFF(ucc_team_params_t, oob, 72);
OFF(ucc_team_params_t, p2p_conn, 112);
OFF(ucc_team_params_t, mem_params, 152);
OFF(ucc_team_params_t, ep_map, 168);
OFF(ucc_team_params_t, id, 200);
ASSERT(sizeof(ucc_team_attr_t) == 72);
OFF(ucc_team_attr_t, ordering, 8);
OFF(ucc_team_attr_t, outstanding_colls, 16);
OFF(ucc_team_attr_t, ep, 24);
OFF(ucc_team_attr_t, ep_range, 32);
OFF(ucc_team_attr_t, sync_type, 36);
OFF(ucc_team_attr_t, mem_params, 40);
OFF(ucc_team_attr_t, size, 56);
OFF(ucc_team_attr_t, eps, 64);

/* collectives */
ASSERT(sizeof(ucc_coll_req_t) == 4);
OFF(ucc_coll_req_t, status, 0);
ASSERT(sizeof(ucc_coll_callback_t) == 16);
ASSERT(sizeof(ucc_coll_buffer_info_t) == 32);
OFF(ucc_coll_buffer_info_t, count, 8);
OFF(ucc_coll_buffer_info_t, datatype, 16);
OFF(ucc_coll_buffer_info_t, mem_type, 24);
ASSERT(sizeof(ucc_coll_buffer_info_v_t) == 40);
OFF(ucc_coll_buffer_info_v_t, counts, 8);
OFF(ucc_coll_buffer_info_v_t, displacements, 16);
OFF(ucc_coll_buffer_info_v_t, datatype, 24);
OFF(ucc_coll_buffer_info_v_t, mem_type, 32);
ASSERT(sizeof(ucc_coll_args_t) == 200);
OFF(ucc_coll_args_t, coll_type, 8);
OFF(ucc_coll_args_t, src, 16);
OFF(ucc_coll_args_t, dst, 56);
OFF(ucc_coll_args_t, op, 96);
OFF(ucc_coll_args_t, flags, 104);
OFF(ucc_coll_args_t, root, 112);
OFF(ucc_coll_args_t, error_type, 120);
OFF(ucc_coll_args_t, tag, 124);
OFF(ucc_coll_args_t, global_work_buffer, 128);
OFF(ucc_coll_args_t, cb, 136);
OFF(ucc_coll_args_t, timeout, 152);
OFF(ucc_coll_args_t, active_set, 160);
OFF(ucc_coll_args_t, active_set.stride, 168);
OFF(ucc_coll_args_t, active_set.size, 176);
OFF(ucc_coll_args_t, src_memh, 184); /* UCC 1.3's struct ends here */
OFF(ucc_coll_args_t, dst_memh, 192);
ASSERT(sizeof(ucc_coll_id_t) == 2 && sizeof(ucc_count_t) == 8 && sizeof(ucc_aint_t) == 8);
ASSERT(sizeof(ucc_datatype_t) == 8);

/* events */
ASSERT(sizeof(ucc_ev_t) == 32);
OFF(ucc_ev_t, ev_context, 8);
OFF(ucc_ev_t, ev_context_size, 16);
OFF(ucc_ev_t, req, 24);
ASSERT(sizeof(ucc_ee_params_t) == 24);
OFF(ucc_ee_params_t, ee_context, 8);
OFF(ucc_ee_params_t, ee_context_size, 16);

/* user-defined datatypes (declared for source compatibility) */
ASSERT(sizeof(ucc_reduce_cb_params_t) == 72);
ASSERT(sizeof(ucc_generic_dt_ops_t) == 88);
OFF(ucc_generic_dt_ops_t, reduce, 72);

int main(void) { return 0; }
