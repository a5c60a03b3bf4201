//! Golden blocks: hand-built K-quant and IQ4 blocks whose dequantized values are known.
use super::tests::deq;
use super::f16::f32_to_f16;
use super::GgmlType;

fn f16b(v: f32) -> [u8; 2] {
    f32_to_f16(v).to_le_bytes()
}

#[test]
fn golden_q2_k() {
    // scales[g] = (min g%16 << 4) | scale 1; qs all 0b11_10_01_00: shift s gives value s.
    let mut b = vec![0u8; 84];
    for g in 0..16 {
        b[g] = ((g as u8 % 4) << 4) | 1;
    }
    b[16..80].fill(0b11_10_01_00);
    b[80..82].copy_from_slice(&f16b(0.5));
    b[82..84].copy_from_slice(&f16b(0.25));
    let y = deq(GgmlType::Q2_K, &b, 256);
    for e in 0..256 {
        let value = ((e % 128) / 32) as f32;
        let min = ((e / 16) % 4) as f32;
        assert_eq!(y[e], 0.5 * value - 0.25 * min, "e={e}");
    }
}

#[test]
fn golden_q3_k() {
    // hmask bit set → value is the low 2 bits; clear → low 2 bits - 4. Scales all 33 (=+1).
    let mut b = vec![0u8; 110];
    b[0..32].fill(0b0101_0101); // bits 0,2,4,6 set: pieces j even in chunk 0, j odd... per 4n+j
    b[32..96].fill(0b11_11_11_11); // low bits 3 everywhere
                                   // scale 33 = 0b10_0001: low nibble 1, high bits 2
    for j in 0..8 {
        b[96 + j] = 0x11;
    }
    for k in 0..4 {
        b[104 + k] = 0b10_10_10_10;
    }
    b[108..110].copy_from_slice(&f16b(1.0));
    let y = deq(GgmlType::Q3_K, &b, 256);
    for e in 0..256 {
        let (n, j) = (e / 128, (e % 128) / 32);
        let bit = 4 * n + j;
        let want = if bit % 2 == 0 { 3.0 } else { -1.0 };
        assert_eq!(y[e], want, "e={e}");
    }
}

#[test]
fn golden_q5_k_and_iq4() {
    // Q5_K: scales/mins all 1 (bytes 0..8 = 1, 8..12 = 0x11), qh all ones → +16, qs 0x21.
    let mut b = vec![0u8; 176];
    b[0..2].copy_from_slice(&f16b(1.0));
    b[2..4].copy_from_slice(&f16b(2.0));
    b[4..12].fill(1);
    b[12..16].fill(0x11);
    b[16..48].fill(0xFF);
    b[48..176].fill(0x21);
    let y = deq(GgmlType::Q5_K, &b, 256);
    for e in 0..256 {
        let q = if (e % 64) < 32 { 1 + 16 } else { 2 + 16 };
        assert_eq!(y[e], q as f32 - 2.0, "e={e}");
    }
    // IQ4_NL: code 0 → -127, code 15 → 113.
    let mut b = vec![0u8; 18];
    b[0..2].copy_from_slice(&f16b(0.5));
    b[2..18].fill(0xF0);
    let y = deq(GgmlType::IQ4_NL, &b, 32);
    assert!(y[..16].iter().all(|&v| v == -63.5) && y[16..].iter().all(|&v| v == 56.5));
    // IQ4_XS: sub-block ib scale = ib (scales_l nibbles, scales_h 0b10 each → +32) - 32 + 32.
    let mut b = vec![0u8; 136];
    b[0..2].copy_from_slice(&f16b(1.0));
    b[2..4].copy_from_slice(&0xAAAAu16.to_le_bytes());
    for k in 0..4 {
        b[4 + k] = (((2 * k + 1) << 4) | (2 * k)) as u8;
    }
    b[8..136].fill(0x88); // code 8 → 1
    let y = deq(GgmlType::IQ4_XS, &b, 256);
    for e in 0..256 {
        assert_eq!(y[e], (e / 32) as f32, "e={e}");
    }
}

// ---------------------------------------------------------------- multi-row kernels
