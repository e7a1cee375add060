//! RSA signatures, made beside `ssh-key` 0.6.7: it builds the RSA key from the prime `p` twice,
//! which `rsa` 0.9.7 and later refuse, so every RSA signature failed (RustCrypto/SSH#387, fixed
//! upstream after 0.6.7). The key is built here from `p` and `q`; the signature is the same
//! PKCS#1 v1.5 over SHA-512 (`rsa-sha2-512`) that `ssh-keygen -Y sign` makes.

use rsa::signature::{SignatureEncoding as _, Signer as _};
use ssh_key::{Algorithm, HashAlg, Mpint, SshSig};

use super::format::NAMESPACE;

/// The SSH signature of `payload` by `keypair`, namespace `git`, SHA-512.
///
/// # Errors
/// The library's words when the key's parts do not make an RSA key or it cannot sign.
pub(super) fn sign(
    keypair: &ssh_key::private::RsaKeypair,
    payload: &[u8],
) -> Result<SshSig, String> {
    let uint = |m: &Mpint| rsa::BigUint::from_bytes_be(m.as_positive_bytes().unwrap_or_default());
    let private = &keypair.private;
    // `rsa`'s key zeroes its parts when dropped.
    let key = rsa::RsaPrivateKey::from_components(
        uint(&keypair.public.n),
        uint(&keypair.public.e),
        uint(&private.d),
        vec![uint(&private.p), uint(&private.q)],
    )
    .map_err(|e| e.to_string())?;
    let signed =
        SshSig::signed_data(NAMESPACE, HashAlg::Sha512, payload).map_err(|e| e.to_string())?;
    let data = rsa::pkcs1v15::SigningKey::<rsa::sha2::Sha512>::new(key)
        .try_sign(&signed)
        .map_err(|e| e.to_string())?
        .to_vec();
    let algorithm = Algorithm::Rsa {
        hash: Some(HashAlg::Sha512),
    };
    let signature = ssh_key::Signature::new(algorithm, data).map_err(|e| e.to_string())?;
    SshSig::new(
        keypair.public.clone().into(),
        NAMESPACE,
        HashAlg::Sha512,
        signature,
    )
    .map_err(|e| e.to_string())
}
