// Conversions between f32 and the narrow floats, bit for bit as the host
// memory component (mc/src/reduce/narrow.rs, mc/src/fp8.rs): widening is
// exact; narrowing rounds to nearest, ties to even, with subnormals.
// NaN payloads: the host keeps them through conversions, the GPU's float
// arithmetic does not (it produces the canonical NaN), so only "is NaN" is
// promised across host and device.

// 2^112: moves an f16 exponent (bias 15) to f32's (bias 127).
#define FC_TWO_POW_112 0x77800000u

// ---- IEEE binary16 ----

// Exact. NaN stays NaN (made quiet, payload kept, as x86 F16C does).
FC_INLINE float fc_f16_to_f32(u16 h) {
#ifdef __CUDA_ARCH__
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
#else
    u32 sign = (u32)(h & 0x8000u) << 16;
    u32 em = h & 0x7fffu;
    // Exponent and mantissa moved into f32's fields, scaled by 2^112: exact
    // for normals and subnormals alike (f32 denormals are kept, never flushed).
    u32 mag = fc_bits(fc_f32(em << 13) * fc_f32(FC_TWO_POW_112));
    if (em >= 0x7c00u) {
        mag = 0x7f800000u | (em << 13) | (em > 0x7c00u ? 0x00400000u : 0u);
    }
    return fc_f32(sign | mag);
#endif
}

// Round to nearest, ties to even; overflow gives infinity; NaN gives a quiet NaN.
FC_INLINE u16 fc_f32_to_f16(float x) {
#ifdef __CUDA_ARCH__
    // Through a 32-bit register: with a 16-bit asm output ("=h"), NVRTC
    // (CUDA 13, H100) stored the result's low byte as 0 when the element was
    // written byte by byte (unaligned), seen as -16 for -17.75.
    u32 r;
    asm("{ .reg .b16 t; cvt.rn.f16.f32 t, %1; mov.b32 %0, {t, t}; }" : "=r"(r) : "f"(x));
    return (u16)r;
#else
    // As half's software conversion (and F16C's cvtps2ph with rounding mode 0).
    u32 b = fc_bits(x);
    u32 sign = (b & 0x80000000u) >> 16;
    u32 exp = b & 0x7f800000u;
    u32 man = b & 0x007fffffu;
    if (exp == 0x7f800000u) {
        return (u16)(man != 0 ? (sign | 0x7e00u | (man >> 13)) : (sign | 0x7c00u));
    }
    i32 half_exp = (i32)(exp >> 23) - 127 + 15;
    if (half_exp >= 0x1f) {
        return (u16)(sign | 0x7c00u);
    }
    if (half_exp <= 0) {
        if (14 - half_exp > 24) {
            return (u16)sign;
        }
        man |= 0x00800000u;
        u32 half_man = man >> (14 - half_exp);
        u32 round_bit = 1u << (13 - half_exp);
        if ((man & round_bit) != 0 && (man & (3u * round_bit - 1u)) != 0) {
            half_man += 1;
        }
        return (u16)(sign | half_man);
    }
    u32 he = (u32)half_exp << 10;
    u32 half_man = man >> 13;
    if ((man & 0x1000u) != 0 && (man & 0x2fffu) != 0) {
        return (u16)(((he | half_man) + 1) | sign);
    }
    return (u16)(sign | he | half_man);
#endif
}

// ---- bfloat16 ----

// Exact (a shift; a signalling NaN stays signalling, as on the host).
FC_INLINE float fc_bf16_to_f32(u16 h) { return fc_f32((u32)h << 16); }

// Round to nearest, ties to even; NaN stays NaN (made quiet).
FC_INLINE u16 fc_f32_to_bf16(float x) {
    u32 b = fc_bits(x);
    u32 rounded = (b + 0x7fffu + ((b >> 16) & 1u)) >> 16;
    u32 quiet_nan = (b >> 16) | 0x40u;
    return (u16)((b & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);
}

// ---- OCP float8 (E4M3 "FN" and E5M2) ----
// M mantissa bits, E exponent bits, B bias; FINITE: E4M3's all-ones
// exponent holds numbers and only S.1111.111 is NaN.

// The value of a code: exact, NaN for NaN codes, +-inf for E5M2's infinities.
template <u32 M, u32 E, u32 B, bool FINITE> FC_INLINE float fc_fp8_to_f32(u8 code) {
    u32 sign = (u32)(code & 0x80u) << 24;
    u32 a = code & 0x7fu;
    // Exponent and mantissa moved into f32's fields, scaled by 2^(127 - B):
    // exact for normals and subnormals alike.
    u32 mag = fc_bits(fc_f32(a << (23 - M)) * fc_f32((254u - B) << 23));
    const u32 exp_max = ((1u << E) - 1u) << M;
    if (FINITE) {
        mag = a == 0x7fu ? 0x7fc00000u : mag;
    } else {
        mag = a > exp_max ? 0x7fc00000u : (a == exp_max ? 0x7f800000u : mag);
    }
    return fc_f32(sign | mag);
}

// The magnitude bits `abs` (not NaN) rounded to the format, ties to even;
// may exceed the largest finite code (the caller saturates or overflows).
template <u32 M, u32 B> FC_INLINE u32 fc_fp8_round(u32 abs) {
    const u32 min_normal = 127u + 1u - B;
    const u32 shift = 23u - M;
    // Normal: re-bias in place, round the dropped bits to even (a carry rolls into the exponent).
    u32 t = abs - ((127u - B) << 23);
    u32 normal = (t + ((1u << (shift - 1)) - 1u) + ((t >> shift) & 1u)) >> shift;
    // Subnormal: adding 2^23 * (smallest subnormal) makes the FPU round to a
    // multiple of it, ties to even; the sum's low bits are then the code.
    float m = fc_f32((127u + 1u - B - M + 23u) << 23);
    u32 subnormal = fc_bits(fc_f32(abs) + m) - fc_bits(m);
    return (abs >> 23) >= min_normal ? normal : subnormal;
}

// The float8 conversions below run as single instructions on devices of
// compute capability 8.9 and later (cvt ... e4m3x2/e5m2x2): the software
// forms cost ~20 instructions an element, which made float8 reductions
// compute-bound at 0.55-0.72 of the copy bandwidth on an H100 (bf16: 1.0).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
#define FC_HW_FP8 1
#endif

// E4M3: nearest even; beyond +-448 saturates to +-448; NaN gives 0x7f/0xff.
FC_INLINE u8 fc_f32_to_e4m3(float x) {
#ifdef FC_HW_FP8
    // satfinite: +-448 beyond the range (infinities too), NaN to a NaN code.
    u32 r;
    asm("{ .reg .b16 t; cvt.rn.satfinite.e4m3x2.f32 t, %1, %1; cvt.u32.u16 %0, t; }" : "=r"(r) : "f"(x));
    return (u8)r;
#else
    u32 b = fc_bits(x);
    u32 sign = (b >> 24) & 0x80u;
    u32 abs = b & 0x7fffffffu;
    if (abs > 0x7f800000u) {
        return (u8)(sign | 0x7fu);
    }
    u32 mag = fc_fp8_round<3, 7>(abs);
    return (u8)(sign | (mag > 0x7eu ? 0x7eu : mag));
#endif
}

// E5M2: nearest even; overflow gives +-inf; NaN gives the quiet NaN 0x7e/0xfe.
FC_INLINE u8 fc_f32_to_e5m2(float x) {
    u32 b = fc_bits(x);
    u32 sign = (b >> 24) & 0x80u;
    u32 abs = b & 0x7fffffffu;
    if (abs > 0x7f800000u) {
        return (u8)(sign | 0x7eu);
    }
#ifdef FC_HW_FP8
    // The instruction saturates (PTX has no non-saturating form from f32);
    // this format overflows instead: from 61440 (the midpoint between the
    // largest finite 57344 and 65536, a tie that rounds to the even 65536)
    // the result is infinity.
    u32 r;
    asm("{ .reg .b16 t; cvt.rn.satfinite.e5m2x2.f32 t, %1, %1; cvt.u32.u16 %0, t; }" : "=r"(r) : "f"(x));
    return abs >= 0x47700000u ? (u8)(sign | 0x7cu) : (u8)r;
#else
    u32 mag = fc_fp8_round<2, 15>(abs);
    return (u8)(sign | (mag > 0x7bu ? 0x7cu : mag));
#endif
}

FC_INLINE float fc_e4m3_to_f32(u8 c) {
#ifdef FC_HW_FP8
    // Exact: every E4M3 value is an f16 (NaN stays NaN).
    float f;
    asm("{ .reg .b16 a, lo, hi; .reg .b32 h2; cvt.u16.u32 a, %1; cvt.rn.f16x2.e4m3x2 h2, a; "
        "mov.b32 {lo, hi}, h2; cvt.f32.f16 %0, lo; }"
        : "=f"(f)
        : "r"((u32)c));
    return f;
#else
    return fc_fp8_to_f32<3, 4, 7, true>(c);
#endif
}
FC_INLINE float fc_e5m2_to_f32(u8 c) {
#ifdef __CUDA_ARCH__
    // E5M2 is binary16's upper byte (same exponent, two of its mantissa
    // bits): exact, infinities and NaN included, with the f16 conversion
    // instruction every device has.
    return fc_f16_to_f32((u16)((u32)c << 8));
#else
    return fc_fp8_to_f32<2, 5, 15, false>(c);
#endif
}

// A narrow float as a type: its storage and both conversions.
struct F16 {
    typedef u16 raw;
    static FC_INLINE float widen(u16 x) { return fc_f16_to_f32(x); }
    static FC_INLINE u16 narrow(float x) { return fc_f32_to_f16(x); }
};
struct BF16 {
    typedef u16 raw;
    static FC_INLINE float widen(u16 x) { return fc_bf16_to_f32(x); }
    static FC_INLINE u16 narrow(float x) { return fc_f32_to_bf16(x); }
};
struct E4M3 {
    typedef u8 raw;
    static FC_INLINE float widen(u8 x) { return fc_e4m3_to_f32(x); }
    static FC_INLINE u8 narrow(float x) { return fc_f32_to_e4m3(x); }
};
struct E5M2 {
    typedef u8 raw;
    static FC_INLINE float widen(u8 x) { return fc_e5m2_to_f32(x); }
    static FC_INLINE u8 narrow(float x) { return fc_f32_to_e5m2(x); }
};
