// Element arithmetic and the reduction policies, as the host kernels do it
// (mc/src/reduce/{num,elementwise,narrow}.rs):
// - integers wrap (computed in the unsigned type, so C has no overflow UB);
// - max/min on floats ignore a NaN operand (maxNum), ties keep the accumulator;
// - avg divides the sum once, on the final write: integers truncate toward
//   zero, floats divide by the divisor converted to the accumulator type;
// - the logical operations work on 0/1 truth values.
//
// A policy K says how one element goes through a reduction:
//   typedef elem (as stored), acc (accumulator);
//   acc load(elem first); acc fold(acc a, elem next); elem store(acc a, u32 avg_divisor).

// The unsigned type in which T's wrapping arithmetic is done (at least u32,
// so that C's integer promotion cannot make a signed overflow).
template <class T> struct fc_unsigned;
template <> struct fc_unsigned<i8> { typedef u32 type; };
template <> struct fc_unsigned<u8> { typedef u32 type; };
template <> struct fc_unsigned<i16> { typedef u32 type; };
template <> struct fc_unsigned<u16> { typedef u32 type; };
template <> struct fc_unsigned<i32> { typedef u32 type; };
template <> struct fc_unsigned<u32> { typedef u32 type; };
template <> struct fc_unsigned<i64> { typedef u64 type; };
template <> struct fc_unsigned<u64> { typedef u64 type; };
template <> struct fc_unsigned<i128> { typedef u128 type; };
template <> struct fc_unsigned<u128> { typedef u128 type; };

// The type in which avg divides T: wide enough for every value and every u32 divisor.
template <class T> struct fc_divtype;
template <> struct fc_divtype<i8> { typedef i64 type; };
template <> struct fc_divtype<u8> { typedef u64 type; };
template <> struct fc_divtype<i16> { typedef i64 type; };
template <> struct fc_divtype<u16> { typedef u64 type; };
template <> struct fc_divtype<i32> { typedef i64 type; };
template <> struct fc_divtype<u32> { typedef u64 type; };
template <> struct fc_divtype<i64> { typedef i64 type; };
template <> struct fc_divtype<u64> { typedef u64 type; };
template <> struct fc_divtype<i128> { typedef i128 type; };
template <> struct fc_divtype<u128> { typedef u128 type; };
template <> struct fc_divtype<float> { typedef float type; };
template <> struct fc_divtype<double> { typedef double type; };

// Integers: division truncates toward zero, as Rust's. Floats: IEEE division.
template <class T> FC_INLINE T fc_div(T x, u32 d) {
    typedef typename fc_divtype<T>::type W;
    return (T)((W)x / (W)d);
}

struct OpAdd {
    template <class T> static FC_INLINE T int_op(T a, T b) {
        typedef typename fc_unsigned<T>::type U;
        return (T)((U)a + (U)b);
    }
    static FC_INLINE float float_op(float a, float b) { return a + b; }
    static FC_INLINE double float_op(double a, double b) { return a + b; }
};
struct OpMul {
    template <class T> static FC_INLINE T int_op(T a, T b) {
        typedef typename fc_unsigned<T>::type U;
        return (T)((U)a * (U)b);
    }
    static FC_INLINE float float_op(float a, float b) { return a * b; }
    static FC_INLINE double float_op(double a, double b) { return a * b; }
};
struct OpMax {
    template <class T> static FC_INLINE T int_op(T a, T b) { return b > a ? b : a; }
    // maxNum: a NaN operand is ignored; equal operands (+0/-0) keep the accumulator `a`.
    template <class F> static FC_INLINE F float_op(F a, F b) { return (b > a || a != a) ? b : a; }
};
struct OpMin {
    template <class T> static FC_INLINE T int_op(T a, T b) { return b < a ? b : a; }
    template <class F> static FC_INLINE F float_op(F a, F b) { return (b < a || a != a) ? b : a; }
};
struct OpAnd {
    template <class T> static FC_INLINE T int_op(T a, T b) { return (T)(a & b); }
};
struct OpOr {
    template <class T> static FC_INLINE T int_op(T a, T b) { return (T)(a | b); }
};
struct OpXor {
    template <class T> static FC_INLINE T int_op(T a, T b) { return (T)(a ^ b); }
};

// Integers in their own arithmetic; AVG divides on store.
template <class T, class Op, bool AVG> struct KInt {
    typedef T elem;
    typedef T acc;
    static FC_INLINE T load(T x) { return x; }
    static FC_INLINE T fold(T a, T x) { return Op::template int_op<T>(a, x); }
    static FC_INLINE T store(T a, u32 d) { return (AVG && d != 0) ? fc_div(a, d) : a; }
};

// Logical and/or/xor: operands become 0/1, then the bitwise operation.
template <class T, class Op> struct KLogical {
    typedef T elem;
    typedef T acc;
    static FC_INLINE T truth(T x) { return (T)(x != 0 ? 1 : 0); }
    static FC_INLINE T load(T x) { return truth(x); }
    static FC_INLINE T fold(T a, T x) { return Op::template int_op<T>(a, truth(x)); }
    static FC_INLINE T store(T a, u32) { return a; }
};

// f32 and f64 in their own arithmetic.
template <class F, class Op, bool AVG> struct KFloat {
    typedef F elem;
    typedef F acc;
    static FC_INLINE F load(F x) { return x; }
    static FC_INLINE F fold(F a, F x) { return Op::float_op(a, x); }
    static FC_INLINE F store(F a, u32 d) { return (AVG && d != 0) ? fc_div(a, d) : a; }
};

// f16, bf16 and float8 (N: F16, BF16, E4M3, E5M2): accumulated in f32, rounded once on store.
template <class N, class Op, bool AVG> struct KNarrow {
    typedef typename N::raw elem;
    typedef float acc;
    static FC_INLINE float load(elem x) { return N::widen(x); }
    static FC_INLINE float fold(float a, elem x) { return Op::float_op(a, N::widen(x)); }
    static FC_INLINE elem store(float a, u32 d) { return N::narrow((AVG && d != 0) ? fc_div(a, d) : a); }
};

// A complex number as stored: real part, then imaginary part.
template <class F> struct fc_complex {
    F re;
    F im;
};

// Complex sum (AVG: divided by the divisor part by part).
template <class F, bool AVG> struct KComplexSum {
    typedef fc_complex<F> elem;
    typedef fc_complex<F> acc;
    static FC_INLINE acc load(elem x) { return x; }
    static FC_INLINE acc fold(acc a, elem x) {
        acc r;
        r.re = a.re + x.re;
        r.im = a.im + x.im;
        return r;
    }
    static FC_INLINE elem store(acc a, u32 d) {
        if (AVG && d != 0) {
            a.re = fc_div(a.re, d);
            a.im = fc_div(a.im, d);
        }
        return a;
    }
};

// Complex product: (ar*xr - ai*xi, ar*xi + ai*xr), no fused multiply-add
// (NVRTC runs with --fmad=false), as the host computes it.
template <class F> struct KComplexProd {
    typedef fc_complex<F> elem;
    typedef fc_complex<F> acc;
    static FC_INLINE acc load(elem x) { return x; }
    static FC_INLINE acc fold(acc a, elem x) {
        acc r;
        r.re = a.re * x.re - a.im * x.im;
        r.im = a.re * x.im + a.im * x.re;
        return r;
    }
    static FC_INLINE elem store(acc a, u32) { return a; }
};
