// The one reduce loop every (dtype, op) entry point instantiates.
//
// dst[i] = K::store(fold(... fold(K::load(src0[i]), src1[i]) ..., srcN-1[i]))
//
// Sources are folded in order 0, 1, ..., n-1, as the host does, so results
// are bit-identical to the host's. A grid-stride loop covers the elements:
// - when every operand address is 16-byte aligned (and the element divides
//   16 bytes), each thread loads one 16-byte vector of every source (the
//   next source's load in flight while the current one is folded), reduces
//   its elements and stores one vector; the elements past the last whole vector (the tail) go through
//   the scalar loop;
//   (sources are a runtime loop, not unrolled: a kernel per (dtype, op) stays
//   small, so NVRTC and the driver's JIT stay quick)
// - otherwise the scalar loop does every element, with natural loads when the
//   addresses are aligned for the element and byte loads when they are not.

// One element at `addr`: a natural access when ALIGNED, else byte by byte.
template <class E, bool ALIGNED> FC_INLINE E fc_load(u64 addr) {
    if constexpr (ALIGNED) {
        return *(const E*)addr;
    } else {
        union {
            E e;
            u8 b[sizeof(E)];
        } u;
        FC_UNROLL
        for (int k = 0; k < (int)sizeof(E); ++k) {
            u.b[k] = ((const u8*)addr)[k];
        }
        return u.e;
    }
}

template <class E, bool ALIGNED> FC_INLINE void fc_store(u64 addr, E x) {
    if constexpr (ALIGNED) {
        *(E*)addr = x;
    } else {
        union {
            E e;
            u8 b[sizeof(E)];
        } u;
        u.e = x;
        FC_UNROLL
        for (int k = 0; k < (int)sizeof(E); ++k) {
            ((u8*)addr)[k] = u.b[k];
        }
    }
}

// The sources of a launch travel as eight scalars (registers), never as an
// array: an array indexed by a runtime source number would live in local
// memory and be re-read after every store.
#define FC_SRC_PARAMS u64 s0, u64 s1, u64 s2, u64 s3, u64 s4, u64 s5, u64 s6, u64 s7
#define FC_SRC_ARGS s0, s1, s2, s3, s4, s5, s6, s7

// The address of source s (s < FC_MAX_SOURCES).
FC_INLINE u64 fc_pick(u32 s, FC_SRC_PARAMS) {
    u64 r = s0;
    r = s == 1 ? s1 : r;
    r = s == 2 ? s2 : r;
    r = s == 3 ? s3 : r;
    r = s == 4 ? s4 : r;
    r = s == 5 ? s5 : r;
    r = s == 6 ? s6 : r;
    r = s == 7 ? s7 : r;
    return r;
}

// Element i of every source into dst[i].
template <class K, bool ALIGNED>
FC_INLINE void fc_reduce_one(u64 dst, FC_SRC_PARAMS, u32 n, u32 divisor, u64 i) {
    typedef typename K::elem E;
    typedef typename K::acc A;
    const u64 off = i * sizeof(E);
    A acc = K::load(fc_load<E, ALIGNED>(s0 + off));
    FC_ROLLED
    for (u32 s = 1; s < n; ++s) {
        acc = K::fold(acc, fc_load<E, ALIGNED>(fc_pick(s, FC_SRC_ARGS) + off));
    }
    fc_store<E, ALIGNED>(dst + off, K::store(acc, divisor));
}

// 16-byte vector v of every source into vector v of dst (all addresses
// 16-byte aligned). The load of the next source is issued before the
// current one is folded, so two loads per thread are in flight.
template <class K> FC_INLINE void fc_reduce_vector(u64 dst, FC_SRC_PARAMS, u32 n, u32 divisor, u64 v) {
    typedef typename K::elem E;
    typedef typename K::acc A;
    const int W = 16 / (int)sizeof(E);
    union lanes {
        uint4 v;
        E e[W];
    };
    const u64 off = v * 16;
    lanes cur, next;
    cur.v = fc_load16(s0 + off);
    if (n > 1) {
        next.v = fc_load16(s1 + off);
    }
    A acc[W];
    FC_UNROLL
    for (int j = 0; j < W; ++j) {
        acc[j] = K::load(cur.e[j]);
    }
    FC_ROLLED
    for (u32 s = 1; s < n; ++s) {
        cur = next;
        if (s + 1 < n) {
            next.v = fc_load16(fc_pick(s + 1, FC_SRC_ARGS) + off);
        }
        FC_UNROLL
        for (int j = 0; j < W; ++j) {
            acc[j] = K::fold(acc[j], cur.e[j]);
        }
    }
    lanes out;
    FC_UNROLL
    for (int j = 0; j < W; ++j) {
        out.e[j] = K::store(acc[j], divisor);
    }
    fc_store16(dst + off, out.v);
}

// The body of the entry points of a (dtype, op): not inlined, so that the
// plain and the strided kernel (and sum and avg) share one copy of the code.
template <class K> __device__ __noinline__ void fc_reduce(u64 dst, FC_SRC_PARAMS, u64 count, u32 n, u32 divisor) {
    typedef typename K::elem E;
    if (n == 0 || n > FC_MAX_SOURCES) {
        return;
    }
    u64 any = dst; // the OR of every address: its low bits give the common alignment
    FC_ROLLED
    for (u32 s = 0; s < n; ++s) {
        any |= fc_pick(s, FC_SRC_ARGS);
    }
    const u64 first = fc_thread();
    const u64 step = fc_threads();
    u64 done = 0;
    if constexpr (sizeof(E) <= 16 && 16 % sizeof(E) == 0) {
        if ((any & 15) == 0) {
            const u64 vectors = count / (16 / sizeof(E));
            FC_ROLLED
            for (u64 v = first; v < vectors; v += step) {
                fc_reduce_vector<K>(dst, FC_SRC_ARGS, n, divisor, v);
            }
            done = vectors * (16 / sizeof(E));
        }
    }
    if ((any & (alignof(E) - 1)) == 0) {
        FC_ROLLED
        for (u64 i = done + first; i < count; i += step) {
            fc_reduce_one<K, true>(dst, FC_SRC_ARGS, n, divisor, i);
        }
    } else {
        FC_ROLLED
        for (u64 i = done + first; i < count; i += step) {
            fc_reduce_one<K, false>(dst, FC_SRC_ARGS, n, divisor, i);
        }
    }
}

// The sources of a plain launch, and of a strided one (source i at srcs[0] + i * src_stride).
#define FC_PLAIN_SOURCES(a) a.srcs[0], a.srcs[1], a.srcs[2], a.srcs[3], a.srcs[4], a.srcs[5], a.srcs[6], a.srcs[7]
#define FC_STRIDED_SOURCES(a)                                                                                          \
    a.srcs[0], a.srcs[0] + a.src_stride, a.srcs[0] + 2 * a.src_stride, a.srcs[0] + 3 * a.src_stride,                   \
        a.srcs[0] + 4 * a.src_stride, a.srcs[0] + 5 * a.src_stride, a.srcs[0] + 6 * a.src_stride,                      \
        a.srcs[0] + 7 * a.src_stride
