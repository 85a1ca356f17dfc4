#!/usr/bin/env bash
# no_std check: a `#![no_std]` library calling keygen-from-seed, sign with a
# context and verify, built for thumbv7em-none-eabihf (Cortex-M4F, no OS, no
# allocator) with each candidate's default features off. Pass/fail per crate;
# the first compiler errors of a failure go to results/nostd-<crate>.log.
set -uo pipefail
cd "$(dirname "$0")"
target=thumbv7em-none-eabihf
rustup target list --installed | grep -qx "$target" || { echo "$target not installed"; exit 1; }
work=${CARGO_TARGET_DIR:-$PWD/target}/nostd
mkdir -p "$work" results
declare -A dep code
dep[ml-dsa]='ml-dsa = { version = "0.1.2", default-features = false }'
code[ml-dsa]='
use ml_dsa::{ExpandedSigningKey, MlDsa44, Signature, VerifyingKey};
pub fn run(seed: &[u8; 32], msg: &[u8], ctx: &[u8]) -> bool {
    let sk = ExpandedSigningKey::<MlDsa44>::from_seed(&(*seed).into());
    let sig: Signature<MlDsa44> = match sk.sign_deterministic(msg, ctx) { Ok(s) => s, Err(_) => return false };
    let vk: VerifyingKey<MlDsa44> = sk.verifying_key();
    vk.verify_with_context(msg, ctx, &sig)
}'
dep[fips204]='fips204 = { version = "0.5.0", default-features = false, features = ["ml-dsa-44"] }'
code[fips204]='
use fips204::ml_dsa_44::KG;
use fips204::traits::{KeyGen, Signer, Verifier};
pub fn run(seed: &[u8; 32], msg: &[u8], ctx: &[u8]) -> bool {
    let (pk, sk) = KG::keygen_from_seed(seed);
    match sk.try_sign_with_seed(&[0; 32], msg, ctx) { Ok(sig) => pk.verify(msg, &sig, ctx), Err(_) => false }
}'
dep[libcrux-ml-dsa]='libcrux-ml-dsa = { version = "0.0.11", default-features = false, features = ["mldsa44"] }'
code[libcrux-ml-dsa]='
use libcrux_ml_dsa::ml_dsa_44;
pub fn run(seed: &[u8; 32], msg: &[u8], ctx: &[u8]) -> bool {
    let kp = ml_dsa_44::generate_key_pair(*seed);
    match ml_dsa_44::sign(&kp.signing_key, msg, ctx, [0; 32]) {
        Ok(sig) => ml_dsa_44::verify(&kp.verification_key, msg, ctx, &sig).is_ok(),
        Err(_) => false,
    }
}'
dep[aws-lc-rs]='aws-lc-rs = { version = "1.19.0", default-features = false, features = ["aws-lc-sys"] }'
code[aws-lc-rs]='
use aws_lc_rs::signature::{PqdsaKeyPair, ML_DSA_44_SIGNING};
pub fn run(seed: &[u8; 32], msg: &[u8], _ctx: &[u8]) -> bool {
    let kp = match PqdsaKeyPair::from_seed(&ML_DSA_44_SIGNING, seed) { Ok(k) => k, Err(_) => return false };
    let mut sig = [0u8; 2420];
    kp.sign(msg, &mut sig).is_ok()
}'
echo "| crate | no_std build for $target (default features off) |"
echo "|---|---|"
for name in ml-dsa fips204 libcrux-ml-dsa aws-lc-rs; do
  d="$work/$name"
  mkdir -p "$d/src"
  printf '[package]\nname = "nostd-check"\nversion = "0.0.0"\nedition = "2021"\n[workspace]\n[dependencies]\n%s\n[profile.release]\npanic = "abort"\n' "${dep[$name]}" > "$d/Cargo.toml"
  printf '#![no_std]\n%s\n' "${code[$name]}" > "$d/src/lib.rs"
  if timeout 900 cargo build --release -j2 --quiet --manifest-path "$d/Cargo.toml" --target "$target" > "results/nostd-$name.log" 2>&1; then
    echo "| $name | builds |"
  else
    echo "| $name | FAILS: $(grep -m1 -E '^error' "results/nostd-$name.log" | cut -c1-150) |"
  fi
done
