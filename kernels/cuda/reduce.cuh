// The one reduce loop every (dtype, op) entry point instantiates.
//
// dst[i] = K::store(fold(... fold(K::load(src0[i]), src1[i]) ..., srcN-1[i]))
//
// Sources are folded in order 0, 1, ..., n-1, as the host does, so results
// are bit-identical to the host's. A grid-stride loop covers the elements:
// - when every operand address is 16-byte aligned (and the element divides
//   16 bytes), each thread loads one 16-byte vector of every source (all
//   loads issued before the first use), reduces its elements and stores one
//   vector; the elements past the last whole vector (the tail) go through
//   the scalar loop;
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

// Element i of every source into dst[i].
template <class K, bool ALIGNED>
FC_INLINE void fc_reduce_one(const u64* src, u32 n, u64 dst, u64 i, u32 divisor) {
    typedef typename K::elem E;
    typedef typename K::acc A;
    const u64 off = i * sizeof(E);
    A acc = K::load(fc_load<E, ALIGNED>(src[0] + off));
    for (u32 s = 1; s < n; ++s) {
        acc = K::fold(acc, fc_load<E, ALIGNED>(src[s] + off));
    }
    fc_store<E, ALIGNED>(dst + off, K::store(acc, divisor));
}

// 16-byte vector v of every source into vector v of dst (all addresses 16-byte aligned).
template <class K> FC_INLINE void fc_reduce_vector(const u64* src, u32 n, u64 dst, u64 v, u32 divisor) {
    typedef typename K::elem E;
    typedef typename K::acc A;
    const int W = 16 / (int)sizeof(E);
    union lanes {
        uint4 v;
        E e[W];
    };
    lanes in[FC_MAX_SOURCES];
    // Issue every load before the first use, so that they are all in flight together.
    FC_UNROLL
    for (u32 s = 0; s < FC_MAX_SOURCES; ++s) {
        if (s < n) {
            in[s].v = ((const uint4*)src[s])[v];
        }
    }
    A acc[W];
    FC_UNROLL
    for (int j = 0; j < W; ++j) {
        acc[j] = K::load(in[0].e[j]);
    }
    FC_UNROLL
    for (u32 s = 1; s < FC_MAX_SOURCES; ++s) {
        if (s < n) {
            FC_UNROLL
            for (int j = 0; j < W; ++j) {
                acc[j] = K::fold(acc[j], in[s].e[j]);
            }
        }
    }
    lanes out;
    FC_UNROLL
    for (int j = 0; j < W; ++j) {
        out.e[j] = K::store(acc[j], divisor);
    }
    ((uint4*)dst)[v] = out.v;
}

template <class K, bool STRIDED> FC_INLINE void fc_reduce(const ReduceArgs& a) {
    typedef typename K::elem E;
    const u32 n = a.nsrcs;
    if (n == 0 || n > FC_MAX_SOURCES) {
        return;
    }
    u64 src[FC_MAX_SOURCES];
    u64 any = a.dst; // the OR of every address: its low bits give the common alignment
    FC_UNROLL
    for (u32 s = 0; s < FC_MAX_SOURCES; ++s) {
        src[s] = STRIDED ? a.srcs[0] + (u64)s * a.src_stride : a.srcs[s];
        if (s < n) {
            any |= src[s];
        }
    }
    const u64 count = a.count;
    const u64 first = fc_thread();
    const u64 step = fc_threads();
    u64 done = 0;
    if constexpr (sizeof(E) <= 16 && 16 % sizeof(E) == 0) {
        if ((any & 15) == 0) {
            const u64 vectors = count / (16 / sizeof(E));
            for (u64 v = first; v < vectors; v += step) {
                fc_reduce_vector<K>(src, n, a.dst, v, a.avg_divisor);
            }
            done = vectors * (16 / sizeof(E));
        }
    }
    if ((any & (alignof(E) - 1)) == 0) {
        for (u64 i = done + first; i < count; i += step) {
            fc_reduce_one<K, true>(src, n, a.dst, i, a.avg_divisor);
        }
    } else {
        for (u64 i = done + first; i < count; i += step) {
            fc_reduce_one<K, false>(src, n, a.dst, i, a.avg_divisor);
        }
    }
}
