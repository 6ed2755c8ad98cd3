/*
 * ferrocoll's libucc.so.1: status codes of the UCC C interface.
 *
 * Written for ferrocoll; the names and numeric values follow UCC's ABI so
 * that programs built against UCC's headers and programs built against
 * these see the same codes.
 */
#ifndef UCC_STATUS_H_
#define UCC_STATUS_H_

#ifdef __cplusplus
#define BEGIN_C_DECLS extern "C" {
#define END_C_DECLS }
#else
#define BEGIN_C_DECLS
#define END_C_DECLS
#endif

BEGIN_C_DECLS

/* Result of every call. Values >= 0 are states, values < 0 are errors. */
typedef enum {
    UCC_OK                    = 0,
    UCC_INPROGRESS            = 1,
    UCC_OPERATION_INITIALIZED = 2,

    UCC_ERR_NOT_SUPPORTED     = -1,
    UCC_ERR_NOT_IMPLEMENTED   = -2,
    UCC_ERR_INVALID_PARAM     = -3,
    UCC_ERR_NO_MEMORY         = -4,
    UCC_ERR_NO_RESOURCE       = -5,
    /* No more precise code applies (ferrocoll also reports transport
     * failures, such as a peer that went away, with this code; the log line
     * says what happened). */
    UCC_ERR_NO_MESSAGE        = -6,
    UCC_ERR_NOT_FOUND         = -7,
    UCC_ERR_TIMED_OUT         = -8,
    UCC_ERR_LAST              = -100
} ucc_status_t;

/* A static, human-readable text for a status code. */
const char *ucc_status_string(ucc_status_t status);

END_C_DECLS

#endif
