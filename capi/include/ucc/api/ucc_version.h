/*
 * ferrocoll's libucc.so.1: the version of the UCC interface it provides.
 *
 * Programs compiled against these headers pass UCC_API_MAJOR and
 * UCC_API_MINOR to ucc_init_version (through the inline ucc_init); the
 * library accepts any 1.x caller, since every parameter structure is read
 * only as far as its mask says.
 */
#ifndef UCC_VERSION_H_
#define UCC_VERSION_H_

#define UCC_VERSION_MAJOR_SHIFT 24
#define UCC_VERSION_MINOR_SHIFT 16
#define UCC_VERSION(_major, _minor) \
    (((_major) << UCC_VERSION_MAJOR_SHIFT) | ((_minor) << UCC_VERSION_MINOR_SHIFT))

#define UCC_API_MAJOR      1
#define UCC_API_MINOR      4
#define UCC_API_VERSION    UCC_VERSION(1, 4)
#define UCC_VERSION_STRING "1.4.0"
#define UCC_GIT_REVISION   "ferrocoll"

#endif
