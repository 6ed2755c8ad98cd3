/*
 * ferrocoll's libucc.so.1: basic types and handles of the UCC C interface.
 *
 * Handles are opaque pointers to objects that the library owns. The one
 * exception is the collective request: its first member is the status that
 * the inline ucc_collective_test reads.
 */
#ifndef UCC_DEF_H_
#define UCC_DEF_H_

#include <ucc/api/ucc_status.h>
#include <stddef.h>
#include <stdint.h>

/* Library, context, team, execution engine, configuration handles. */
typedef struct ucc_lib_info       *ucc_lib_h;
typedef struct ucc_context        *ucc_context_h;
typedef struct ucc_team           *ucc_team_h;
typedef struct ucc_ee             *ucc_ee_h;
typedef struct ucc_lib_config     *ucc_lib_config_h;
typedef struct ucc_context_config *ucc_context_config_h;
typedef struct ucc_mem_handle     *ucc_mem_h;

/* A memory map handle (ucc_mem_map); ferrocoll makes none. */
typedef void *ucc_mem_map_mem_h;

/*
 * A collective request. The library writes `status` when the collective
 * changes state, from whichever thread progresses it, so it may be read at
 * any time from any thread. It is volatile here so that a loop that does
 * nothing but read it re-reads memory; the layout is that of a plain
 * ucc_status_t.
 */
typedef struct ucc_coll_req *ucc_coll_req_h;
typedef struct ucc_coll_req {
    volatile ucc_status_t status;
} ucc_coll_req_t;

/*
 * Completion callback: called once when the collective ends, with its
 * status. The only UCC call it may make is ucc_collective_finalize on its
 * own request.
 */
typedef struct ucc_coll_callback {
    void (*cb)(void *data, ucc_status_t status);
    void  *data;
} ucc_coll_callback_t;

/* Element counts and displacements of v-collectives (32-bit arrays unless
 * the 64-bit flags are set). */
typedef uint64_t ucc_count_t;
typedef uint64_t ucc_aint_t;

#define UCC_BIT(i)  (1ul << (i))
#define UCC_MASK(i) (UCC_BIT(i) - 1)

/* What ucc_lib_config_print and ucc_context_config_print show. */
typedef enum {
    UCC_CONFIG_PRINT_CONFIG = UCC_BIT(0),
    UCC_CONFIG_PRINT_HEADER = UCC_BIT(1),
    UCC_CONFIG_PRINT_DOC    = UCC_BIT(2),
    UCC_CONFIG_PRINT_HIDDEN = UCC_BIT(3)
} ucc_config_print_flags_t;

/* Tag of a collective (ordering key of active-set collectives). */
typedef uint16_t ucc_coll_id_t;

typedef void  *ucc_p2p_conn_t;
typedef void  *ucc_context_addr_h;
typedef size_t ucc_context_addr_len_t;

/* User-defined datatypes (not supported by ferrocoll). */
typedef struct ucc_dt_generic ucc_dt_generic_t;

/*
 * A datatype is a 64-bit word: predefined types have their index shifted
 * left by UCC_DATATYPE_SHIFT with the low bits clear; generic ones have
 * UCC_DATATYPE_GENERIC set.
 */
typedef enum {
    UCC_DATATYPE_PREDEFINED = 0,
    UCC_DATATYPE_GENERIC    = UCC_BIT(0),
    UCC_DATATYPE_SHIFT      = 3,
    UCC_DATATYPE_CLASS_MASK = UCC_MASK(3)
} ucc_dt_type_t;

#define UCC_PREDEFINED_DT(_id) \
    (ucc_datatype_t)((((uint64_t)(_id)) << UCC_DATATYPE_SHIFT) | (UCC_DATATYPE_PREDEFINED))

#endif
