//! ggml tensor types: ids as stored in GGUF, block geometry, names.
// Source of the ids and block sizes: ggml/include/ggml.h and ggml/src/ggml.c (type_traits).
use super::blocks::*;

#[allow(non_camel_case_types)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GgmlType {
    F32,
    F16,
    Q4_0,
    Q4_1,
    Q5_0,
    Q5_1,
    Q8_0,
    Q8_1,
    Q2_K,
    Q3_K,
    Q4_K,
    Q5_K,
    Q6_K,
    Q8_K,
    IQ2_XXS,
    IQ2_XS,
    IQ3_XXS,
    IQ1_S,
    IQ4_NL,
    IQ3_S,
    IQ2_S,
    IQ4_XS,
    I8,
    I16,
    I32,
    I64,
    F64,
    IQ1_M,
    BF16,
    TQ1_0,
    TQ2_0,
    MXFP4,
}

impl GgmlType {
    pub fn from_id(id: u32) -> Option<GgmlType> {
        use GgmlType::*;
        Some(match id {
            0 => F32,
            1 => F16,
            2 => Q4_0,
            3 => Q4_1,
            6 => Q5_0,
            7 => Q5_1,
            8 => Q8_0,
            9 => Q8_1,
            10 => Q2_K,
            11 => Q3_K,
            12 => Q4_K,
            13 => Q5_K,
            14 => Q6_K,
            15 => Q8_K,
            16 => IQ2_XXS,
            17 => IQ2_XS,
            18 => IQ3_XXS,
            19 => IQ1_S,
            20 => IQ4_NL,
            21 => IQ3_S,
            22 => IQ2_S,
            23 => IQ4_XS,
            24 => I8,
            25 => I16,
            26 => I32,
            27 => I64,
            28 => F64,
            29 => IQ1_M,
            30 => BF16,
            34 => TQ1_0,
            35 => TQ2_0,
            39 => MXFP4,
            _ => return None,
        })
    }

    pub fn id(self) -> u32 {
        use GgmlType::*;
        match self {
            F32 => 0,
            F16 => 1,
            Q4_0 => 2,
            Q4_1 => 3,
            Q5_0 => 6,
            Q5_1 => 7,
            Q8_0 => 8,
            Q8_1 => 9,
            Q2_K => 10,
            Q3_K => 11,
            Q4_K => 12,
            Q5_K => 13,
            Q6_K => 14,
            Q8_K => 15,
            IQ2_XXS => 16,
            IQ2_XS => 17,
            IQ3_XXS => 18,
            IQ1_S => 19,
            IQ4_NL => 20,
            IQ3_S => 21,
            IQ2_S => 22,
            IQ4_XS => 23,
            I8 => 24,
            I16 => 25,
            I32 => 26,
            I64 => 27,
            F64 => 28,
            IQ1_M => 29,
            BF16 => 30,
            TQ1_0 => 34,
            TQ2_0 => 35,
            MXFP4 => 39,
        }
    }

    /// (elements per block, bytes per block); the supported quantized types' from `blocks.rs`
    pub fn block(self) -> (usize, usize) {
        use GgmlType::*;
        match self {
            F32 => (1, 4),
            F16 | BF16 => (1, 2),
            Q4_0 => (QK, Q4_0_BYTES),
            Q4_1 => (QK, Q4_1_BYTES),
            Q5_0 => (QK, Q5_0_BYTES),
            Q5_1 => (QK, Q5_1_BYTES),
            Q8_0 => (QK, Q8_0_BYTES),
            Q8_1 => (QK, Q8_1_BYTES),
            Q2_K => (QK_K, Q2_K_BYTES),
            Q3_K => (QK_K, Q3_K_BYTES),
            Q4_K => (QK_K, Q4_K_BYTES),
            Q5_K => (QK_K, Q5_K_BYTES),
            Q6_K => (QK_K, Q6_K_BYTES),
            Q8_K => (QK_K, Q8_K_BYTES),
            IQ2_XXS => (256, 66),
            IQ2_XS => (256, 74),
            IQ3_XXS => (256, 98),
            IQ1_S => (256, 50),
            IQ4_NL => (QK, IQ4_NL_BYTES),
            IQ3_S => (256, 110),
            IQ2_S => (256, 82),
            IQ4_XS => (QK_K, IQ4_XS_BYTES),
            I8 => (1, 1),
            I16 => (1, 2),
            I32 => (1, 4),
            I64 | F64 => (1, 8),
            IQ1_M => (256, 56),
            TQ1_0 => (QK_K, TQ1_0_BYTES),
            TQ2_0 => (QK_K, TQ2_0_BYTES),
            MXFP4 => (QK, MXFP4_BYTES),
        }
    }

    pub fn block_size(self) -> usize {
        self.block().0
    }

    pub fn type_size(self) -> usize {
        self.block().1
    }

    /// Bytes needed for `n` elements (n must be a multiple of the block size).
    pub fn row_bytes(self, n: usize) -> usize {
        let (bs, ts) = self.block();
        n / bs * ts
    }

    pub fn name(self) -> &'static str {
        use GgmlType::*;
        match self {
            F32 => "F32",
            F16 => "F16",
            Q4_0 => "Q4_0",
            Q4_1 => "Q4_1",
            Q5_0 => "Q5_0",
            Q5_1 => "Q5_1",
            Q8_0 => "Q8_0",
            Q8_1 => "Q8_1",
            Q2_K => "Q2_K",
            Q3_K => "Q3_K",
            Q4_K => "Q4_K",
            Q5_K => "Q5_K",
            Q6_K => "Q6_K",
            Q8_K => "Q8_K",
            IQ2_XXS => "IQ2_XXS",
            IQ2_XS => "IQ2_XS",
            IQ3_XXS => "IQ3_XXS",
            IQ1_S => "IQ1_S",
            IQ4_NL => "IQ4_NL",
            IQ3_S => "IQ3_S",
            IQ2_S => "IQ2_S",
            IQ4_XS => "IQ4_XS",
            I8 => "I8",
            I16 => "I16",
            I32 => "I32",
            I64 => "I64",
            F64 => "F64",
            IQ1_M => "IQ1_M",
            BF16 => "BF16",
            TQ1_0 => "TQ1_0",
            TQ2_0 => "TQ2_0",
            MXFP4 => "MXFP4",
        }
    }

    /// Types with a dequantize reference and a dot-product kernel in `quant/`.
    pub fn is_supported(self) -> bool {
        use GgmlType::*;
        matches!(
            self,
            F32 | F16 | BF16 | Q4_0 | Q4_1 | Q5_0 | Q5_1 | Q8_0 | Q2_K | Q3_K | Q4_K | Q5_K | Q6_K | IQ4_NL | IQ4_XS | MXFP4 | TQ1_0 | TQ2_0 | IQ2_XXS | IQ2_XS
                | IQ2_S | IQ3_XXS | IQ3_S | IQ1_S | IQ1_M
        )
    }

    /// The names of the supported types ([`Self::is_supported`]), in GGUF id order.
    pub fn supported_names() -> Vec<&'static str> {
        (0..64).filter_map(GgmlType::from_id).filter(|t| t.is_supported()).map(GgmlType::name).collect()
    }
}
