//! The TLS configuration of every client, its CA roots read only when a certificate is first
//! checked: a run that speaks only plain `http://` (to the server and to any proxy) reads no CA
//! file at all, and a run that uses TLS reads each once, on its first handshake.
//!
//! The roots: the bundle file (`SSL_CERT_FILE`, else the system's when neither `SSL_CERT_FILE`
//! nor `SSL_CERT_DIR` is set) and git's `GIT_SSL_CAINFO` and `GIT_PROXY_SSL_CAINFO` (as
//! git-lfs adds them), so the one file a template sets for plain git serves git-session too.
//! The folders of single certificates (`SSL_CERT_DIR`, else the system's) hold, as a rule, the
//! bundle's certificates again, one file each: they are read only when a certificate's issuer
//! is not among the bundle's (as OpenSSL looks a folder up only for an issuer it lacks), so the
//! trust is the same and the usual handshake reads one file. The bundled Mozilla roots when all
//! are empty. A git variable naming a file without a certificate is refused (exit 2) on the
//! first handshake, as git refuses it only for an `https://` URL.

use std::sync::{Arc, OnceLock};

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};

use crate::error::{Error, Result};

/// The client configuration: rustls with the ring provider, safe protocol versions, HTTP/1.1,
/// and a verifier whose roots are read on the first handshake. Reads no file.
///
/// # Errors
/// [`Error::Internal`] when the configuration cannot be built.
pub fn client_config() -> Result<rustls::ClientConfig> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = LazyRoots {
        provider: provider.clone(),
    };
    let mut tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::internal("TLS configuration", e))?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier))
        .with_no_client_auth();
    tls.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(tls)
}

/// Why the roots could not be read: a git variable that names a file git-session cannot use.
/// The handshake that needed them failed; [`refusal`] turns that failure into exit 2.
static REFUSED: OnceLock<String> = OnceLock::new();

/// The refusal of a git CA variable, once a handshake needed the roots and found it unusable:
/// the error the request that failed is reported as (exit 2, naming the variable).
pub fn refusal() -> Option<Error> {
    REFUSED
        .get()
        .map(|why| Error::Usage(crate::error::Refusal::Invalid, why.clone()))
}

/// Where the roots are: the bundle files (read first, with the git variables' files) and the
/// folders of single certificates (read only for an issuer the files lack).
struct Places {
    files: Vec<std::path::PathBuf>,
    dirs: Vec<std::path::PathBuf>,
}

fn places() -> Places {
    let var = |v: &str| std::env::var_os(v).filter(|v| !v.is_empty());
    let (file, dir) = (var("SSL_CERT_FILE"), var("SSL_CERT_DIR"));
    if file.is_some() || dir.is_some() {
        return Places {
            files: file.map(Into::into).into_iter().collect(),
            dirs: dir.map_or_else(Vec::new, |d| std::env::split_paths(&d).collect()),
        };
    }
    let probed = openssl_probe::probe();
    Places {
        files: probed.cert_file.into_iter().collect(),
        dirs: probed.cert_dir,
    }
}

/// The certificates of `GIT_SSL_CAINFO` and `GIT_PROXY_SSL_CAINFO` (only when set).
///
/// # Errors
/// The refusal's text, naming the variable, when one names a file without a certificate.
fn git_roots() -> std::result::Result<Vec<CertificateDer<'static>>, String> {
    let mut certs = Vec::new();
    for var in ["GIT_SSL_CAINFO", "GIT_PROXY_SSL_CAINFO"] {
        let Some(file) = std::env::var_os(var).filter(|v| !v.is_empty()) else {
            continue;
        };
        let found = rustls_native_certs::load_certs_from_paths(Some(file.as_ref()), None);
        if found.certs.is_empty() {
            let why = found.errors.first().map_or_else(
                || "it holds no PEM certificate".to_owned(),
                ToString::to_string,
            );
            return Err(format!(
                "{var} names a CA file git-session cannot use: {}",
                crate::text::line_str(&why)
            ));
        }
        certs.extend(found.certs);
    }
    Ok(certs)
}

/// A verifier over `certs`, or `None` when there are none.
fn verifier_of(
    certs: impl IntoIterator<Item = CertificateDer<'static>>,
    provider: &Arc<CryptoProvider>,
) -> Option<Arc<WebPkiServerVerifier>> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in certs {
        let _ = roots.add(cert);
    }
    if roots.is_empty() {
        return None;
    }
    WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .build()
        .ok()
}

/// The verifiers of the process, built when first needed and shared by every client of the run
/// (a manifest's sessions' included): each file is read once.
struct Verifiers {
    /// The bundle files' and the git variables' roots (the Mozilla roots when no place has any).
    first: Arc<WebPkiServerVerifier>,
    /// Those and the folders', for an issuer `first` lacks (`None`: no folder adds a root).
    all: OnceLock<Option<Arc<WebPkiServerVerifier>>>,
    /// The certificates of `first`, which `all` adds the folders' to.
    first_certs: Vec<CertificateDer<'static>>,
    dirs: Vec<std::path::PathBuf>,
}

static VERIFIERS: OnceLock<std::result::Result<Verifiers, rustls::Error>> = OnceLock::new();

fn build(provider: &Arc<CryptoProvider>) -> std::result::Result<Verifiers, rustls::Error> {
    tracing::debug!("reading the CA roots (first TLS handshake)");
    let git = git_roots().map_err(|why| {
        let _ = REFUSED.set(why.clone());
        rustls::Error::General(why)
    })?;
    let Places { files, mut dirs } = places();
    let mut first_certs: Vec<_> = files
        .iter()
        .flat_map(|f| rustls_native_certs::load_certs_from_paths(Some(f), None).certs)
        .collect();
    if first_certs.is_empty() {
        // No bundle: the folders are all there is.
        for dir in std::mem::take(&mut dirs) {
            first_certs.extend(rustls_native_certs::load_certs_from_paths(None, Some(&dir)).certs);
        }
    }
    first_certs.extend(git);
    let first = verifier_of(first_certs.iter().cloned(), provider).map_or_else(
        || {
            tracing::debug!("no CA roots found; using the bundled Mozilla roots");
            let mut roots = rustls::RootCertStore::empty();
            roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
            WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
                .build()
                .map_err(|e| rustls::Error::General(format!("the CA roots: {e}")))
        },
        Ok,
    )?;
    Ok(Verifiers {
        first,
        all: OnceLock::new(),
        first_certs,
        dirs,
    })
}

impl Verifiers {
    /// The verifier with the folders' roots too, read on the first call.
    fn all(&self, provider: &Arc<CryptoProvider>) -> Option<&Arc<WebPkiServerVerifier>> {
        self.all
            .get_or_init(|| {
                if self.dirs.is_empty() {
                    return None;
                }
                tracing::debug!("an issuer not in the CA bundle: reading the CA folders");
                let known: std::collections::HashSet<&[u8]> =
                    self.first_certs.iter().map(|c| c.as_ref()).collect();
                let extra: Vec<_> = self
                    .dirs
                    .iter()
                    .flat_map(|d| rustls_native_certs::load_certs_from_paths(None, Some(d)).certs)
                    .filter(|c| !known.contains(c.as_ref()))
                    .collect();
                if extra.is_empty() {
                    return None;
                }
                verifier_of(self.first_certs.iter().cloned().chain(extra), provider)
            })
            .as_ref()
    }
}

/// The verifier of every client: [`VERIFIERS`], built from the roots when first needed.
#[derive(Debug)]
struct LazyRoots {
    provider: Arc<CryptoProvider>,
}

impl LazyRoots {
    fn get(&self) -> std::result::Result<&Verifiers, rustls::Error> {
        VERIFIERS
            .get_or_init(|| build(&self.provider))
            .as_ref()
            .map_err(Clone::clone)
    }
}

impl ServerCertVerifier for LazyRoots {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        let verifiers = self.get()?;
        let verify = |v: &WebPkiServerVerifier| {
            v.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        };
        match verify(&verifiers.first) {
            Err(rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer)) => {
                match verifiers.all(&self.provider) {
                    Some(all) => verify(all),
                    None => Err(rustls::Error::InvalidCertificate(
                        rustls::CertificateError::UnknownIssuer,
                    )),
                }
            }
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}
