//! Every ML-DSA-44 candidate behind one shape:
//!
//! * `keygen(which, seed)`: FIPS 204 ML-DSA.KeyGen_internal(ξ) from a 32-byte
//!   seed, returns the 1312-byte public key;
//! * `Keys::sign(which, msg, ctx, rnd)`: pure ML-DSA.Sign with a context
//!   string (`rnd = None` is the deterministic variant, rnd = {0}^32;
//!   `Some(r)` is hedged with the caller's 32 bytes); keys built once;
//! * `verify(which, pk, msg, ctx, sig)`: ML-DSA.Verify with a context, the
//!   public key parsed from its bytes on every call (a client parses the
//!   online key out of each DELE).
//!
//! aws-lc-rs 1.19's safe ML-DSA API (`signature::PqdsaKeyPair`,
//! `UnparsedPublicKey` with `ML_DSA_44`) signs and verifies with an empty
//! context only, so its candidate goes through the same library's C API
//! (aws-lc-sys: `EVP_DigestSign` / `EVP_DigestVerify` with
//! `EVP_PKEY_CTX_set1_signature_context_string`). AWS-LC signs hedged only:
//! no deterministic variant and no caller-supplied rnd.

pub const PK_LEN: usize = 1312;
pub const SIG_LEN: usize = 2420;

/// The online key's seed (any fixed value).
pub const SEED: [u8; 32] = [0x5a; 32];

/// The version-1 response context, 32 bytes with the NUL.
pub const CTX_RESPONSE: &[u8] = b"RoughTime v1 response signature\0";
/// The delegation context, 34 bytes with the NUL.
pub const CTX_DELEGATION: &[u8] = b"RoughTime v1 delegation signature\0";

/// A deterministic test message of `len` bytes (92: an SREP; 1352: a
/// large one, longer than one SHAKE256 block many times over).
pub fn message(len: usize) -> Vec<u8> {
    (0..len as u32).map(|i| (i as u8).wrapping_mul(31).wrapping_add(17)).collect()
}

/// Names, in the order `which` takes them.
pub const NAMES: [&str; 4] = [
    "ml-dsa 0.1.2 (RustCrypto)",
    "fips204 0.5.0",
    "libcrux-ml-dsa 0.0.11",
    "aws-lc-rs 1.19 / aws-lc-sys 0.47 (C)",
];

/// Which candidates can sign deterministically / with a given rnd.
pub const CALLER_RND: [bool; 4] = [true, true, true, false];

pub type Sig = [u8; SIG_LEN];
pub type Pk = [u8; PK_LEN];

type MlDsa44 = ml_dsa::MlDsa44;

/// FIPS 204 Algorithm 6 from the seed; the public key's bytes.
#[inline(never)]
pub fn keygen(which: usize, seed: &[u8; 32]) -> Pk {
    match which {
        0 => {
            use ml_dsa::Keypair;
            let sk = ml_dsa::SigningKey::<MlDsa44>::from_seed(&(*seed).into());
            sk.verifying_key().encode().into()
        }
        1 => {
            use fips204::traits::{KeyGen, SerDes};
            let (pk, _sk) = fips204::ml_dsa_44::KG::keygen_from_seed(seed);
            pk.into_bytes()
        }
        2 => *libcrux_ml_dsa::ml_dsa_44::generate_key_pair(*seed).verification_key.as_ref(),
        3 => {
            use aws_lc_rs::signature::KeyPair;
            let kp = aws_lc_rs::signature::PqdsaKeyPair::from_seed(
                &aws_lc_rs::signature::ML_DSA_44_SIGNING,
                seed,
            )
            .unwrap();
            kp.public_key().as_ref().try_into().unwrap()
        }
        _ => unreachable!(),
    }
}

pub struct Keys {
    mldsa: ml_dsa::ExpandedSigningKey<MlDsa44>,
    fips: fips204::ml_dsa_44::PrivateKey,
    libcrux: libcrux_ml_dsa::ml_dsa_44::MLDSA44SigningKey,
    aws: aws::Key,
}

impl Keys {
    pub fn new(seed: &[u8; 32]) -> Keys {
        use fips204::traits::KeyGen;
        Keys {
            mldsa: ml_dsa::ExpandedSigningKey::<MlDsa44>::from_seed(&(*seed).into()),
            fips: fips204::ml_dsa_44::KG::keygen_from_seed(seed).1,
            libcrux: libcrux_ml_dsa::ml_dsa_44::generate_key_pair(*seed).signing_key,
            aws: aws::Key::private_from_seed(seed).unwrap(),
        }
    }

    /// Pure ML-DSA.Sign with context `ctx`. `rnd = None`: deterministic
    /// (aws-lc: its own hedged signing, it has no other). `Some(r)`: hedged
    /// with r (aws-lc: ignored, its own randomness).
    #[inline(never)]
    pub fn sign(&self, which: usize, msg: &[u8], ctx: &[u8], rnd: Option<&[u8; 32]>) -> Option<Sig> {
        match which {
            0 => {
                let sig = match rnd {
                    None => self.mldsa.sign_deterministic(msg, ctx).ok()?,
                    Some(r) => {
                        // M' = 0 ‖ |ctx| ‖ ctx ‖ M (FIPS 204 Algorithm 2, step 10)
                        if ctx.len() > 255 {
                            return None;
                        }
                        let head = [0u8, ctx.len() as u8];
                        self.mldsa.sign_internal(&[&head, ctx, msg], &(*r).into())
                    }
                };
                Some(sig.encode().into())
            }
            1 => {
                use fips204::traits::Signer;
                self.fips.try_sign_with_seed(rnd.unwrap_or(&[0; 32]), msg, ctx).ok()
            }
            2 => libcrux_ml_dsa::ml_dsa_44::sign(&self.libcrux, msg, ctx, *rnd.unwrap_or(&[0; 32]))
                .ok()
                .map(|s| *s.as_ref()),
            3 => aws::sign(&self.aws, msg, ctx),
            _ => unreachable!(),
        }
    }
}

/// ML-DSA.Verify with context, the public key parsed from `pk`.
#[inline(never)]
pub fn verify(which: usize, pk: &[u8], msg: &[u8], ctx: &[u8], sig: &[u8]) -> bool {
    let (Ok(pk), Ok(sig)) = (<&Pk>::try_from(pk), <&Sig>::try_from(sig)) else {
        return false;
    };
    match which {
        0 => {
            let vk = ml_dsa::VerifyingKey::<MlDsa44>::decode(&(*pk).into());
            match ml_dsa::Signature::<MlDsa44>::try_from(&sig[..]) {
                Ok(s) => vk.verify_with_context(msg, ctx, &s),
                Err(_) => false,
            }
        }
        1 => {
            use fips204::traits::{SerDes, Verifier};
            match fips204::ml_dsa_44::PublicKey::try_from_bytes(*pk) {
                Ok(vk) => vk.verify(msg, sig, ctx),
                Err(_) => false,
            }
        }
        2 => libcrux_ml_dsa::ml_dsa_44::verify(
            &libcrux_ml_dsa::ml_dsa_44::MLDSA44VerificationKey::new(*pk),
            msg,
            ctx,
            &libcrux_ml_dsa::ml_dsa_44::MLDSA44Signature::new(*sig),
        )
        .is_ok(),
        3 => match aws::Key::public_from_bytes(pk) {
            Some(k) => aws::verify(&k, msg, ctx, sig),
            None => false,
        },
        _ => unreachable!(),
    }
}

/// AWS-LC's ML-DSA through its C API, for the context string.
pub mod aws {
    use aws_lc_sys as s;
    use std::ptr::{null, null_mut};

    /// An owned `EVP_PKEY` (ML-DSA-44, private or public).
    pub struct Key(*mut s::EVP_PKEY);

    // SAFETY: an EVP_PKEY is reference-counted and not mutated by signing or
    // verifying (each operation has its own EVP_MD_CTX).
    unsafe impl Send for Key {}
    // SAFETY: see above.
    unsafe impl Sync for Key {}

    impl Drop for Key {
        fn drop(&mut self) {
            // SAFETY: self.0 came from an EVP_PKEY_*_new call and is freed once.
            unsafe { s::EVP_PKEY_free(self.0) }
        }
    }

    impl Key {
        pub fn private_from_seed(seed: &[u8; 32]) -> Option<Key> {
            // SAFETY: seed is 32 readable bytes; a NULL result is checked.
            let p = unsafe {
                s::EVP_PKEY_pqdsa_new_raw_private_key(s::NID_MLDSA44, seed.as_ptr(), seed.len())
            };
            (!p.is_null()).then_some(Key(p))
        }

        /// From the seed or the expanded private key (AWS-LC takes either).
        pub fn private_from_bytes(sk: &[u8]) -> Option<Key> {
            // SAFETY: sk is readable for its length; a NULL result is checked.
            let p = unsafe {
                s::EVP_PKEY_pqdsa_new_raw_private_key(s::NID_MLDSA44, sk.as_ptr(), sk.len())
            };
            (!p.is_null()).then_some(Key(p))
        }

        pub fn public_from_bytes(pk: &[u8]) -> Option<Key> {
            // SAFETY: pk is readable for its length; a NULL result is checked.
            let p = unsafe {
                s::EVP_PKEY_pqdsa_new_raw_public_key(s::NID_MLDSA44, pk.as_ptr(), pk.len())
            };
            (!p.is_null()).then_some(Key(p))
        }
    }

    /// An owned `EVP_MD_CTX`, freed on every path.
    struct Md(*mut s::EVP_MD_CTX);
    impl Drop for Md {
        fn drop(&mut self) {
            // SAFETY: from EVP_MD_CTX_new, freed once (NULL is accepted).
            unsafe { s::EVP_MD_CTX_free(self.0) }
        }
    }

    pub fn sign(key: &Key, msg: &[u8], ctx: &[u8]) -> Option<super::Sig> {
        let mut sig = [0u8; super::SIG_LEN];
        let mut len = sig.len();
        // SAFETY: every pointer is either a live object created here or a
        // buffer readable/writable for the length passed with it; return
        // codes are checked.
        unsafe {
            let md = Md(s::EVP_MD_CTX_new());
            if md.0.is_null() {
                return None;
            }
            let mut pctx: *mut s::EVP_PKEY_CTX = null_mut();
            if s::EVP_DigestSignInit(md.0, &mut pctx, null(), null_mut(), key.0) != 1 {
                return None;
            }
            if !ctx.is_empty()
                && s::EVP_PKEY_CTX_set1_signature_context_string(pctx, ctx.as_ptr(), ctx.len()) != 1
            {
                return None;
            }
            if s::EVP_DigestSign(md.0, sig.as_mut_ptr(), &mut len, msg.as_ptr(), msg.len()) != 1 {
                return None;
            }
        }
        (len == super::SIG_LEN).then_some(sig)
    }

    pub fn verify(key: &Key, msg: &[u8], ctx: &[u8], sig: &[u8]) -> bool {
        // SAFETY: as in `sign`.
        unsafe {
            let md = Md(s::EVP_MD_CTX_new());
            if md.0.is_null() {
                return false;
            }
            let mut pctx: *mut s::EVP_PKEY_CTX = null_mut();
            if s::EVP_DigestVerifyInit(md.0, &mut pctx, null(), null_mut(), key.0) != 1 {
                return false;
            }
            if !ctx.is_empty()
                && s::EVP_PKEY_CTX_set1_signature_context_string(pctx, ctx.as_ptr(), ctx.len()) != 1
            {
                return false;
            }
            let ok = s::EVP_DigestVerify(md.0, sig.as_ptr(), sig.len(), msg.as_ptr(), msg.len()) == 1;
            s::ERR_clear_error();
            ok
        }
    }
}

/// A Roughtime message: u32 count, count-1 u32 offsets, count tags, values.
/// Returns the value of `tag`, if the message is well formed enough.
pub fn rt_get<'a>(msg: &'a [u8], tag: &[u8; 4]) -> Option<&'a [u8]> {
    let word = |i: usize| -> Option<u32> {
        Some(u32::from_le_bytes(msg.get(4 * i..4 * i + 4)?.try_into().ok()?))
    };
    let n = word(0)? as usize;
    if n == 0 {
        return None;
    }
    let body = msg.get(8 * n..)?;
    for i in 0..n {
        if msg.get(4 * n + 4 * i..4 * n + 4 * i + 4)? == tag {
            let start = if i == 0 { 0 } else { word(i)? as usize };
            let end = if i + 1 == n { body.len() } else { word(i + 1)? as usize };
            return body.get(start..end);
        }
    }
    None
}

/// Hex decoding for the vector files (whitespace ignored).
pub fn unhex(s: &str) -> Vec<u8> {
    let digits: Vec<u8> = s.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    digits
        .chunks(2)
        .map(|p| u8::from_str_radix(std::str::from_utf8(p).unwrap(), 16).unwrap())
        .collect()
}

/// The expanded 2560-byte private key from the seed (FIPS 204 skEncode), for
/// the NIST keyGen vectors.
pub fn keygen_sk(which: usize, seed: &[u8; 32]) -> Vec<u8> {
    match which {
        #[allow(deprecated)] // to_expanded: the encoding the vectors give
        0 => ml_dsa::ExpandedSigningKey::<MlDsa44>::from_seed(&(*seed).into()).to_expanded().to_vec(),
        1 => {
            use fips204::traits::{KeyGen, SerDes};
            fips204::ml_dsa_44::KG::keygen_from_seed(seed).1.into_bytes().to_vec()
        }
        2 => libcrux_ml_dsa::ml_dsa_44::generate_key_pair(*seed).signing_key.as_slice().to_vec(),
        3 => {
            use aws_lc_rs::encoding::AsRawBytes;
            let kp = aws_lc_rs::signature::PqdsaKeyPair::from_seed(
                &aws_lc_rs::signature::ML_DSA_44_SIGNING,
                seed,
            )
            .unwrap();
            kp.private_key().as_raw_bytes().unwrap().as_ref().to_vec()
        }
        _ => unreachable!(),
    }
}

/// Pure ML-DSA.Sign with an expanded 2560-byte private key (the NIST sigGen
/// vectors give no seed). `rnd` as in `Keys::sign`.
pub fn sign_with_sk(which: usize, sk: &[u8], msg: &[u8], ctx: &[u8], rnd: Option<&[u8; 32]>) -> Option<Sig> {
    let sk: &[u8; 2560] = sk.try_into().ok()?;
    match which {
        0 => {
            #[allow(deprecated)] // from_expanded: the form the vectors give
            let key = ml_dsa::ExpandedSigningKey::<MlDsa44>::from_expanded(&(*sk).into());
            let sig = match rnd {
                None => key.sign_deterministic(msg, ctx).ok()?,
                Some(r) => {
                    let head = [0u8, u8::try_from(ctx.len()).ok()?];
                    key.sign_internal(&[&head, ctx, msg], &(*r).into())
                }
            };
            Some(sig.encode().into())
        }
        1 => {
            use fips204::traits::{SerDes, Signer};
            let key = fips204::ml_dsa_44::PrivateKey::try_from_bytes(*sk).ok()?;
            key.try_sign_with_seed(rnd.unwrap_or(&[0; 32]), msg, ctx).ok()
        }
        2 => libcrux_ml_dsa::ml_dsa_44::sign(
            &libcrux_ml_dsa::ml_dsa_44::MLDSA44SigningKey::new(*sk),
            msg,
            ctx,
            *rnd.unwrap_or(&[0; 32]),
        )
        .ok()
        .map(|s| *s.as_ref()),
        3 => aws::sign(&aws::Key::private_from_bytes(sk)?, msg, ctx),
        _ => unreachable!(),
    }
}

/// The public key belonging to an expanded private key (fips204's
/// derivation), to check signatures made from NIST's private keys.
pub fn pk_of_sk(sk: &[u8]) -> Pk {
    use fips204::traits::{SerDes, Signer};
    fips204::ml_dsa_44::PrivateKey::try_from_bytes(sk.try_into().unwrap()).unwrap().get_public_key().into_bytes()
}
