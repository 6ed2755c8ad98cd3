// maxloc / minloc on (value, int32 index) pairs laid out as the C struct
// { T value; int32_t index; }: P bytes (8, 16 or 32), the index at byte
// max(sizeof(T), 4), as mc/src/reduce/loc.rs.
//
// The larger (maxloc) or smaller (minloc) value wins; equal values keep the
// smaller index; a NaN never beats a number (two NaNs: the smaller index).
// Narrow floats are compared as f32. The winner's value and index bits are
// copied unchanged and the padding of the destination is written as zero.

// A pair as stored (8-byte aligned when the buffer is; otherwise the kernel
// reads and writes it byte by byte).
template <int P> struct alignas(8) fc_pair {
    u64 w[P / 8];
};

// The value half of a pair: its storage type and what it is compared as.
template <class R> struct LocSelf {
    typedef R raw;
    typedef R key;
    static FC_INLINE key k(R r) { return r; }
};
template <class N> struct LocNarrow {
    typedef typename N::raw raw;
    typedef float key;
    static FC_INLINE float k(raw r) { return N::widen(r); }
};

// The unsigned integer of S bytes.
template <int S> struct fc_uint;
template <> struct fc_uint<1> { typedef u8 type; };
template <> struct fc_uint<2> { typedef u16 type; };
template <> struct fc_uint<4> { typedef u32 type; };
template <> struct fc_uint<8> { typedef u64 type; };
template <> struct fc_uint<16> { typedef u128 type; };

template <class V, int P> struct fc_pair_layout {
    typedef typename V::raw R;
    // Compile-time constants without storage (static const members become device globals).
    enum { SIZE = (int)sizeof(R), ALIGN = SIZE > 4 ? SIZE : 4, INDEX = SIZE >= 4 ? SIZE : 4 };
    static_assert(P == (SIZE + 4 + ALIGN - 1) / ALIGN * ALIGN, "P must be C's size of { T value; int32_t index; }");

    // The value bits (little-endian, from byte 0).
    static FC_INLINE R value(fc_pair<P> p) {
        typedef typename fc_uint<SIZE>::type B;
        if constexpr (SIZE == 16) {
            return fc_pun<R>((B)(((u128)p.w[1] << 64) | (u128)p.w[0]));
        } else {
            return fc_pun<R>((B)p.w[0]);
        }
    }
    static FC_INLINE i32 index(fc_pair<P> p) { return (i32)(u32)(p.w[INDEX / 8] >> (8 * (INDEX % 8))); }
    // Bytes of word i that belong to the value or the index (the rest is padding).
    static FC_INLINE u64 mask(int i) {
        u64 m = 0;
        FC_UNROLL
        for (int b = 0; b < 8; ++b) {
            int at = 8 * i + b;
            if (at < SIZE || (at >= INDEX && at < INDEX + 4)) {
                m |= (u64)0xff << (8 * b);
            }
        }
        return m;
    }
};

template <class V, int P, bool MAX> struct KLoc {
    typedef fc_pair<P> elem;
    typedef fc_pair<P> acc;
    typedef fc_pair_layout<V, P> L;
    typedef typename V::key key;

    // Whether pair `n` replaces pair `o`.
    static FC_INLINE bool beats(elem n, elem o) {
        key nv = V::k(L::value(n));
        key ov = V::k(L::value(o));
        bool lower_index = L::index(n) < L::index(o);
        bool n_nan = nv != nv;
        bool o_nan = ov != ov;
        if (n_nan || o_nan) {
            return n_nan ? (o_nan && lower_index) : true;
        }
        bool better = MAX ? (nv > ov) : (nv < ov);
        return better || (nv == ov && lower_index);
    }
    static FC_INLINE acc load(elem x) { return x; }
    static FC_INLINE acc fold(acc a, elem x) { return beats(x, a) ? x : a; }
    static FC_INLINE elem store(acc a, u32) {
        elem out;
        FC_UNROLL
        for (int i = 0; i < P / 8; ++i) {
            out.w[i] = a.w[i] & L::mask(i);
        }
        return out;
    }
};
