// SPDX-License-Identifier: Apache-2.0
#include "net/tls.h"

#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/small_file.h"

namespace kvport::net {
namespace {

// The largest plaintext of one TLS record: what a gathered write holds at most.
constexpr size_t kMaxRecordPlaintext = 16 * 1024;

// OpenSSL's queued errors as one line (the queue emptied), or `fallback` when none is queued.
std::string OpenSslErrors(std::string_view fallback) {
  std::string text;
  while (unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof(buf));
    if (!text.empty()) text += "; ";
    // "error:0A000086:SSL routines::certificate verify failed": the reason follows the last ':'.
    const char* reason = std::strrchr(buf, ':');
    text += (reason != nullptr && reason[1] != '\0') ? reason + 1 : buf;
  }
  return text.empty() ? std::string(fallback) : text;
}

// Largest certificate, key or CA file read (a system CA bundle is a few hundred KiB).
constexpr uint64_t kMaxPemFileBytes = uint64_t{4} << 20;

struct BioDeleter {
  void operator()(BIO* bio) const { BIO_free(bio); }
};
struct X509Deleter {
  void operator()(X509* cert) const { X509_free(cert); }
};
struct PkeyDeleter {
  void operator()(EVP_PKEY* key) const { EVP_PKEY_free(key); }
};
struct CtxDeleter {
  void operator()(SSL_CTX* ctx) const { SSL_CTX_free(ctx); }
};
using Bio = std::unique_ptr<BIO, BioDeleter>;

// A file's bytes, wiped when they are dropped (a private key's).
class PemText {
 public:
  PemText() = default;
  explicit PemText(std::string text) : text_(std::move(text)) {}
  PemText(PemText&& other) noexcept : text_(std::move(other.text_)) {}
  PemText& operator=(PemText&& other) noexcept {
    Wipe();
    text_ = std::move(other.text_);
    return *this;
  }
  ~PemText() { Wipe(); }
  Bio NewBio() const { return Bio(BIO_new_mem_buf(text_.data(), static_cast<int>(text_.size()))); }

 private:
  void Wipe() {
    if (!text_.empty()) OPENSSL_cleanse(text_.data(), text_.size());
  }
  std::string text_;
};

// Reads `path` (named `what` in errors) for OpenSSL. kvport reads the file rather than letting
// OpenSSL open the path: a FIFO named by mistake (or by someone else) would otherwise block the
// node's start forever, and the checks of ReadSmallRegularFile (a regular file, bounded) hold
// for certificates as for any file kvport reads. `secret`: a private key, refused when its
// group or other users may read or change it (as OpenSSH refuses a key).
Result<PemText> ReadPemFile(std::string_view what, const std::string& path, bool secret) {
  if (path.empty()) return Status::InvalidArgument(std::string(what) + " is not set");
  uint32_t mode = 0;
  Result<std::string> text = ReadSmallRegularFile(path, kMaxPemFileBytes, what, &mode);
  if (!text.ok()) return Status::InvalidArgument(text.status().message());
  PemText pem(std::move(text).value());
  if (secret) KVPORT_RETURN_IF_ERROR(CheckSecretFileMode(path, mode, 0077, what));
  return pem;
}

// An encrypted key would make OpenSSL ask for a passphrase on the terminal: a node has no one to
// ask, so none is given and the key is refused.
int NoPassphrase(char*, int, int, void*) {
  return 0;
}

// The end of a PEM text (OpenSSL reports it as "no start line"): not an error after one item.
bool OnlyEndOfPem() {
  const unsigned long e = ERR_peek_last_error();
  return ERR_GET_LIB(e) == ERR_LIB_PEM && ERR_GET_REASON(e) == PEM_R_NO_START_LINE;
}

// The certificate chain of `pem` (leaf first), as SSL_CTX_use_certificate_chain_file loads it.
Status UseCertificateChain(SSL_CTX* ctx, const PemText& pem, const std::string& path) {
  auto refused = [&] {
    return Status::InvalidArgument("tls_cert_file " + path + ": not a PEM certificate chain (" +
                                   OpenSslErrors("no certificate in it") + ")");
  };
  Bio bio = pem.NewBio();
  if (!bio) return Status::Internal("BIO_new_mem_buf: " + OpenSslErrors("out of memory"));
  std::unique_ptr<X509, X509Deleter> leaf(
      PEM_read_bio_X509_AUX(bio.get(), nullptr, NoPassphrase, nullptr));
  if (!leaf || SSL_CTX_use_certificate(ctx, leaf.get()) != 1) return refused();
  SSL_CTX_clear_chain_certs(ctx);
  while (X509* intermediate = PEM_read_bio_X509(bio.get(), nullptr, NoPassphrase, nullptr)) {
    if (SSL_CTX_add0_chain_cert(ctx, intermediate) != 1) {
      X509_free(intermediate);
      return refused();
    }
  }
  if (!OnlyEndOfPem()) return refused();
  ERR_clear_error();
  return Status::Ok();
}

Status UsePrivateKey(SSL_CTX* ctx, const PemText& pem, const TlsFiles& files) {
  Bio bio = pem.NewBio();
  if (!bio) return Status::Internal("BIO_new_mem_buf: " + OpenSslErrors("out of memory"));
  std::unique_ptr<EVP_PKEY, PkeyDeleter> key(
      PEM_read_bio_PrivateKey(bio.get(), nullptr, NoPassphrase, nullptr));
  if (!key) {
    return Status::InvalidArgument("tls_key_file " + files.key_file +
                                   ": not a PEM private key, or an encrypted one (" +
                                   OpenSslErrors("unreadable") + ")");
  }
  if (SSL_CTX_use_PrivateKey(ctx, key.get()) != 1 || SSL_CTX_check_private_key(ctx) != 1) {
    return Status::InvalidArgument("tls_key_file " + files.key_file +
                                   " does not match the certificate in " + files.cert_file + " (" +
                                   OpenSslErrors("mismatch") + ")");
  }
  return Status::Ok();
}

// The CA certificates (and CRLs) of `pem` as what a peer's certificate must chain to, as
// SSL_CTX_load_verify_locations loads a file; a server also names them to its clients.
Status UseCertificateAuthorities(SSL_CTX* ctx, const PemText& pem, const std::string& path,
                                 bool server) {
  Bio bio = pem.NewBio();
  if (!bio) return Status::Internal("BIO_new_mem_buf: " + OpenSslErrors("out of memory"));
  STACK_OF(X509_INFO)* items = PEM_X509_INFO_read_bio(bio.get(), nullptr, NoPassphrase, nullptr);
  X509_STORE* store = SSL_CTX_get_cert_store(ctx);
  int certificates = 0;
  Status status;
  for (int i = 0; items != nullptr && i < sk_X509_INFO_num(items) && status.ok(); ++i) {
    X509_INFO* item = sk_X509_INFO_value(items, i);
    if (item->x509 != nullptr) {
      if (X509_STORE_add_cert(store, item->x509) != 1 ||
          (server && SSL_CTX_add_client_CA(ctx, item->x509) != 1)) {
        status = Status::InvalidArgument("tls_ca_file " + path + ": " +
                                         OpenSslErrors("cannot use a certificate in it"));
      }
      ++certificates;
    }
    if (item->crl != nullptr && X509_STORE_add_crl(store, item->crl) != 1) {
      status = Status::InvalidArgument("tls_ca_file " + path + ": " +
                                       OpenSslErrors("cannot use a CRL in it"));
    }
  }
  sk_X509_INFO_pop_free(items, X509_INFO_free);
  if (status.ok() && certificates == 0) {
    status = Status::InvalidArgument("tls_ca_file " + path + ": no PEM CA certificate in it (" +
                                     OpenSslErrors("no certificate") + ")");
  }
  ERR_clear_error();
  return status;
}

bool IsIpAddress(const std::string& host) {
  in6_addr v6;
  in_addr v4;
  return ::inet_pton(AF_INET, host.c_str(), &v4) == 1 ||
         ::inet_pton(AF_INET6, host.c_str(), &v6) == 1;
}

}  // namespace

Result<std::shared_ptr<TlsContext>> TlsContext::Create(TlsRole role, const TlsFiles& files) {
  const bool server = role == TlsRole::kServer;
  // Every file is read (and checked) before any is used: one error names the first bad file.
  PemText cert_pem, key_pem, ca_pem;
  if (server || !files.cert_file.empty() || !files.key_file.empty()) {
    KVPORT_ASSIGN_OR_RETURN(cert_pem, ReadPemFile("tls_cert_file", files.cert_file, false));
    KVPORT_ASSIGN_OR_RETURN(key_pem, ReadPemFile("tls_key_file", files.key_file, true));
  }
  if (!server || !files.ca_file.empty()) {
    KVPORT_ASSIGN_OR_RETURN(ca_pem, ReadPemFile("tls_ca_file", files.ca_file, false));
  }
  ERR_clear_error();
  std::unique_ptr<SSL_CTX, CtxDeleter> ctx(
      SSL_CTX_new(server ? TLS_server_method() : TLS_client_method()));
  if (!ctx) return Status::Internal("SSL_CTX_new: " + OpenSslErrors("out of memory"));
  SSL_CTX_set_min_proto_version(ctx.get(), TLS1_3_VERSION);
  // AES-128-GCM first: with AES instructions it is the fastest TLS 1.3 suite (a quarter fewer
  // rounds than AES-256), and bulk throughput is what a KV cache's TLS costs.
  SSL_CTX_set_ciphersuites(ctx.get(),
                           "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:"
                           "TLS_CHACHA20_POLY1305_SHA256");
  if (server) SSL_CTX_set_options(ctx.get(), SSL_OP_CIPHER_SERVER_PREFERENCE);
  // A peer that closes without close_notify ends the stream like a plain close: kvport's frames
  // carry their own lengths, so a truncated frame is detected without TLS's help.
  SSL_CTX_set_options(ctx.get(), SSL_OP_ENABLE_KTLS | SSL_OP_IGNORE_UNEXPECTED_EOF);
  // Partial writes and a retried write from a moved buffer: what a non-blocking queue needs.
  // Released buffers: an idle connection holds no 34 KiB of record buffers.
  SSL_CTX_set_mode(ctx.get(), SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
                                  SSL_MODE_RELEASE_BUFFERS);
  SSL_CTX_set_default_passwd_cb(ctx.get(), NoPassphrase);
  if (server) {
    // No resumption: sessions are long-lived, and tickets would be post-handshake messages a
    // client reading through the kernel would have to handle.
    SSL_CTX_set_num_tickets(ctx.get(), 0);
    SSL_CTX_set_session_cache_mode(ctx.get(), SSL_SESS_CACHE_OFF);
  }
  if (!files.cert_file.empty()) {
    KVPORT_RETURN_IF_ERROR(UseCertificateChain(ctx.get(), cert_pem, files.cert_file));
    KVPORT_RETURN_IF_ERROR(UsePrivateKey(ctx.get(), key_pem, files));
  }
  bool requires_peer_certificate = false;
  if (!files.ca_file.empty()) {
    KVPORT_RETURN_IF_ERROR(UseCertificateAuthorities(ctx.get(), ca_pem, files.ca_file, server));
    int mode = SSL_VERIFY_PEER;
    if (server) {
      mode |= SSL_VERIFY_FAIL_IF_NO_PEER_CERT;
      requires_peer_certificate = true;
    }
    SSL_CTX_set_verify(ctx.get(), mode, nullptr);
  }
  ERR_clear_error();
  return std::shared_ptr<TlsContext>(
      new TlsContext(role, ctx.release(), requires_peer_certificate, files.verify_hostname));
}

TlsContext::TlsContext(TlsRole role, ssl_ctx_st* ctx, bool requires_peer_certificate,
                       bool verify_hostname)
    : role_(role),
      ctx_(ctx),
      requires_peer_certificate_(requires_peer_certificate),
      verify_hostname_(verify_hostname) {}

TlsContext::~TlsContext() {
  SSL_CTX_free(ctx_);
}

Result<std::unique_ptr<TlsSession>> TlsContext::NewSession(int fd,
                                                           std::string_view server_name) const {
  ERR_clear_error();
  SSL* ssl = SSL_new(ctx_);
  if (ssl == nullptr) return Status::Internal("SSL_new: " + OpenSslErrors("out of memory"));
  std::unique_ptr<TlsSession> session(new TlsSession(ssl));
  if (SSL_set_fd(ssl, fd) != 1) return Status::Internal("SSL_set_fd: " + OpenSslErrors("failed"));
  if (role_ == TlsRole::kServer) {
    SSL_set_accept_state(ssl);
    return session;
  }
  SSL_set_connect_state(ssl);
  const std::string host(server_name);
  if (host.empty() && verify_hostname_) {
    // Nothing to check the certificate's names against: refused rather than accepting any
    // certificate the CA signed, which is what a missing name would otherwise mean.
    return Status::InvalidArgument(
        "TLS: no host name to verify the node's certificate against; connect by the name or "
        "address its certificate carries, or turn name checks off (tls_verify_hostname: false)");
  }
  if (!host.empty() && !verify_hostname_) {
    // SNI still tells the node which name was asked for; nothing is checked against it.
    if (!IsIpAddress(host)) SSL_set_tlsext_host_name(ssl, host.c_str());
  } else if (!host.empty()) {
    if (IsIpAddress(host)) {
      if (X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), host.c_str()) != 1) {
        return Status::InvalidArgument("cannot verify a certificate for address " + host);
      }
    } else {
      SSL_set_tlsext_host_name(ssl, host.c_str());
      if (SSL_set1_host(ssl, host.c_str()) != 1) {
        return Status::InvalidArgument("cannot verify a certificate for host " + host);
      }
    }
  }
  return session;
}

namespace {

std::string AsString(const ASN1_STRING* text) {
  return std::string(reinterpret_cast<const char*>(ASN1_STRING_get0_data(text)),
                     static_cast<size_t>(ASN1_STRING_length(text)));
}

// A name holding a NUL would compare equal to a shorter one in C code downstream: left out.
void AddName(std::vector<std::string>* names, std::string name) {
  if (!name.empty() && name.find('\0') == std::string::npos) names->push_back(std::move(name));
}

// The subject's commonNames, then the DNS and URI subjectAltNames of `cert`.
std::vector<std::string> CertificateNames(X509* cert) {
  std::vector<std::string> names;
  X509_NAME* subject = X509_get_subject_name(cert);
  for (int i = X509_NAME_get_index_by_NID(subject, NID_commonName, -1); i >= 0;
       i = X509_NAME_get_index_by_NID(subject, NID_commonName, i)) {
    unsigned char* utf8 = nullptr;
    const int n =
        ASN1_STRING_to_UTF8(&utf8, X509_NAME_ENTRY_get_data(X509_NAME_get_entry(subject, i)));
    if (n >= 0) AddName(&names, std::string(reinterpret_cast<char*>(utf8), static_cast<size_t>(n)));
    OPENSSL_free(utf8);
  }
  auto* alt =
      static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr));
  for (int i = 0; alt != nullptr && i < sk_GENERAL_NAME_num(alt); ++i) {
    const GENERAL_NAME* name = sk_GENERAL_NAME_value(alt, i);
    if (name->type == GEN_DNS) AddName(&names, AsString(name->d.dNSName));
    if (name->type == GEN_URI) AddName(&names, AsString(name->d.uniformResourceIdentifier));
  }
  GENERAL_NAMES_free(alt);
  return names;
}

}  // namespace

TlsSession::TlsSession(ssl_st* ssl) : ssl_(ssl) {}

TlsSession::~TlsSession() {
  MutexLock lock(mu_);
  SSL_free(ssl_);
}

std::vector<std::string> TlsSession::PeerCertificateNames() const {
  MutexLock lock(mu_);
  if (!handshake_done_) return {};
  // Only a certificate the context asked for and verified names anyone (without
  // SSL_VERIFY_PEER the verify result says X509_V_OK of nothing checked).
  if (SSL_is_server(ssl_) == 0 || (SSL_get_verify_mode(ssl_) & SSL_VERIFY_PEER) == 0 ||
      SSL_get_verify_result(ssl_) != X509_V_OK) {
    return {};
  }
  X509* cert = SSL_get0_peer_certificate(ssl_);
  if (cert == nullptr) return {};
  return CertificateNames(cert);
}

namespace {

// The status of a failed SSL call (`ret` its return value).
Status TlsFailure(SSL* ssl, int ret, std::string_view what) {
  const int error = SSL_get_error(ssl, ret);
  if (error == SSL_ERROR_SYSCALL) {
    const int err = errno;
    std::string queued = OpenSslErrors("");
    if (!queued.empty()) return Status::Unavailable(std::string(what) + ": " + queued);
    if (err != 0) return Status::FromErrno(what, err);
    return Status::Unavailable(std::string(what) + ": the peer closed the connection");
  }
  if (error == SSL_ERROR_ZERO_RETURN) {
    return Status::Unavailable(std::string(what) + ": the peer closed the connection");
  }
  const long verify = SSL_get_verify_result(ssl);
  std::string reason = OpenSslErrors("TLS error");
  if (verify != X509_V_OK) {
    return Status::PermissionDenied(std::string(what) + ": certificate verification failed: " +
                                    X509_verify_cert_error_string(verify));
  }
  return Status::Unavailable(std::string(what) + ": " + reason);
}

}  // namespace

Result<TlsWait> TlsSession::Handshake() {
  MutexLock lock(mu_);
  if (handshake_done_) return TlsWait::kNone;
  ERR_clear_error();
  errno = 0;
  const int r = SSL_do_handshake(ssl_);
  if (r == 1) {
    handshake_done_ = true;
    return TlsWait::kNone;
  }
  switch (SSL_get_error(ssl_, r)) {
    case SSL_ERROR_WANT_READ:
      return TlsWait::kRead;
    case SSL_ERROR_WANT_WRITE:
      return TlsWait::kWrite;
    default:
      return TlsFailure(ssl_, r, "TLS handshake");
  }
}

bool TlsSession::handshake_done() const {
  MutexLock lock(mu_);
  return handshake_done_;
}

Result<IoProgress> TlsSession::Read(const iovec* iov, int count) {
  MutexLock lock(mu_);
  IoProgress progress;
  for (int i = 0; i < count;) {
    if (iov[i].iov_len == 0) {
      ++i;
      continue;
    }
    size_t offset = 0;
    while (offset < iov[i].iov_len) {
      ERR_clear_error();
      errno = 0;
      size_t n = 0;
      const int r = SSL_read_ex(ssl_, static_cast<char*>(iov[i].iov_base) + offset,
                                iov[i].iov_len - offset, &n);
      if (r == 1) {
        offset += n;
        progress.bytes += n;
        continue;
      }
      switch (SSL_get_error(ssl_, r)) {
        case SSL_ERROR_WANT_READ:
        case SSL_ERROR_WANT_WRITE:
          progress.would_block = true;
          return progress;
        case SSL_ERROR_ZERO_RETURN:
          progress.eof = true;
          return progress;
        default: {
          Status failed = TlsFailure(ssl_, r, "read from TLS connection");
          // With bytes in hand, they are the caller's; the error comes again at the next read.
          if (progress.bytes > 0) return progress;
          return failed;
        }
      }
    }
    ++i;
  }
  return progress;
}

Result<size_t> TlsSession::WriteOne(const void* data, size_t size, bool* blocked) {
  ERR_clear_error();
  errno = 0;
  size_t n = 0;
  const int r = SSL_write_ex(ssl_, data, size, &n);
  if (r == 1) return n;
  const int error = SSL_get_error(ssl_, r);
  if (error == SSL_ERROR_WANT_WRITE || error == SSL_ERROR_WANT_READ) {
    *blocked = true;
    return size_t{0};
  }
  return TlsFailure(ssl_, r, "write to TLS connection");
}

Result<IoProgress> TlsSession::Write(const iovec* iov, int count) {
  MutexLock lock(mu_);
  IoProgress progress;
  int i = 0;
  size_t offset = 0;  // bytes of iov[i] already taken
  // Skips `n` bytes of the ranges (they were written).
  auto skip = [&](size_t n) {
    while (n > 0 && i < count) {
      const size_t step = std::min(n, iov[i].iov_len - offset);
      offset += step;
      n -= step;
      if (offset == iov[i].iov_len) {
        ++i;
        offset = 0;
      }
    }
  };
  bool blocked = false;
  if (gather_pending_) {
    // The caller's ranges begin with these bytes (Write's contract): offer them again.
    KVPORT_ASSIGN_OR_RETURN(size_t n, WriteOne(gather_.data(), gather_.size(), &blocked));
    if (blocked) {
      progress.would_block = true;
      return progress;
    }
    gather_pending_ = false;
    progress.bytes += n;
    skip(n);
    gather_.clear();
  }
  while (i < count) {
    if (iov[i].iov_len - offset == 0) {
      ++i;
      offset = 0;
      continue;
    }
    const uint8_t* data = static_cast<const uint8_t*>(iov[i].iov_base) + offset;
    const size_t left = iov[i].iov_len - offset;
    if (left >= kMaxRecordPlaintext) {
      // A large range goes from where it is, in full records.
      KVPORT_ASSIGN_OR_RETURN(size_t n, WriteOne(data, left, &blocked));
      if (blocked) {
        // OpenSSL holds the first record of what it was offered, encrypted: the retry must
        // offer those bytes again, however the caller's next ranges are cut.
        gather_.assign(reinterpret_cast<const char*>(data), std::min(left, kMaxRecordPlaintext));
        gather_pending_ = true;
        break;
      }
      progress.bytes += n;
      skip(n);
      continue;
    }
    // Small ranges: gathered into one record while they fit.
    gather_.clear();
    int j = i;
    size_t j_offset = offset;
    while (j < count) {
      const size_t part = iov[j].iov_len - j_offset;
      if (part >= kMaxRecordPlaintext || gather_.size() + part > kMaxRecordPlaintext) break;
      gather_.append(static_cast<const char*>(iov[j].iov_base) + j_offset, part);
      ++j;
      j_offset = 0;
    }
    KVPORT_ASSIGN_OR_RETURN(size_t n, WriteOne(gather_.data(), gather_.size(), &blocked));
    if (blocked) {
      gather_pending_ = true;
      break;
    }
    progress.bytes += n;
    skip(n);
    gather_.clear();
  }
  progress.would_block = blocked;
  return progress;
}

size_t TlsSession::buffered() const {
  MutexLock lock(mu_);
  return static_cast<size_t>(SSL_pending(ssl_));
}

void TlsSession::SendCloseNotify() {
  MutexLock lock(mu_);
  if (!handshake_done_) return;
  ERR_clear_error();
  SSL_shutdown(ssl_);
  ERR_clear_error();
}

std::string TlsSession::Describe() const {
  MutexLock lock(mu_);
  std::string text = SSL_get_version(ssl_);
  text += ' ';
  text += SSL_get_cipher_name(ssl_);
  return text;
}

bool TlsSession::kernel_send() const {
  MutexLock lock(mu_);
  return BIO_get_ktls_send(SSL_get_wbio(ssl_)) != 0;
}

bool TlsSession::kernel_receive() const {
  MutexLock lock(mu_);
  return BIO_get_ktls_recv(SSL_get_rbio(ssl_)) != 0;
}

std::string TlsSession::PeerSubject() const {
  MutexLock lock(mu_);
  X509* cert = SSL_get0_peer_certificate(ssl_);
  if (cert == nullptr) return "";
  char buf[512];
  X509_NAME_oneline(X509_get_subject_name(cert), buf, sizeof(buf));
  return buf;
}

Result<std::optional<bool>> FirstByteOpensTls(int fd) {
  constexpr uint8_t kHandshakeRecord = 22;
  uint8_t first = 0;
  for (;;) {
    const ssize_t n = ::recv(fd, &first, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n == 1) return std::optional<bool>(first == kHandshakeRecord);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return std::optional<bool>();
    return Status::Unavailable("the peer closed before its first byte");
  }
}

bool KernelTlsAvailable() {
  std::ifstream in("/proc/sys/net/ipv4/tcp_available_ulp");
  std::string ulp;
  while (in >> ulp) {
    if (ulp == "tls") return true;
  }
  return false;
}

// ---- Throwaway certificates -------------------------------------------------------------------

namespace {

struct KeyDeleter {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
struct CertDeleter {
  void operator()(X509* c) const { X509_free(c); }
};
using Key = std::unique_ptr<EVP_PKEY, KeyDeleter>;
using Cert = std::unique_ptr<X509, CertDeleter>;

Status AddExtension(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX v3;
  X509V3_set_ctx_nodb(&v3);
  X509V3_set_ctx(&v3, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &v3, nid, value.c_str());
  if (ext == nullptr) return Status::Internal("certificate extension " + value);
  X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
  return Status::Ok();
}

// A certificate for `key` named `common_name`, signed by `issuer_key` (self-signed when
// `issuer` is null).
Result<Cert> MakeCertificate(EVP_PKEY* key, const std::string& common_name, X509* issuer,
                             EVP_PKEY* issuer_key, const std::vector<std::string>& extensions) {
  Cert cert(X509_new());
  if (!cert) return Status::Internal("X509_new");
  X509_set_version(cert.get(), 2);
  unsigned char serial[16];
  RAND_bytes(serial, sizeof(serial));
  serial[0] &= 0x7f;
  BIGNUM* bn = BN_bin2bn(serial, sizeof(serial), nullptr);
  BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(cert.get()));
  BN_free(bn);
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), 24 * 3600);
  X509_set_pubkey(cert.get(), key);
  X509_NAME* name = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>("kvport test"), -1, -1, 0);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(common_name.c_str()), -1, -1,
                             0);
  X509* signer = issuer != nullptr ? issuer : cert.get();
  X509_set_issuer_name(cert.get(), X509_get_subject_name(signer));
  for (size_t i = 0; i + 1 < extensions.size(); i += 2) {
    KVPORT_RETURN_IF_ERROR(
        AddExtension(cert.get(), signer, OBJ_txt2nid(extensions[i].c_str()), extensions[i + 1]));
  }
  if (X509_sign(cert.get(), issuer_key, EVP_sha256()) == 0) {
    return Status::Internal("X509_sign: " + OpenSslErrors("failed"));
  }
  return cert;
}

Status WritePem(const std::string& path, X509* cert, EVP_PKEY* key) {
  FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) return Status::FromErrno("open " + path, errno);
  if (key != nullptr) ::fchmod(::fileno(f), 0600);
  const bool ok = key != nullptr
                      ? PEM_write_PrivateKey(f, key, nullptr, nullptr, 0, nullptr, nullptr) == 1
                      : PEM_write_X509(f, cert) == 1;
  const bool closed = std::fclose(f) == 0;
  if (!ok || !closed) return Status::IoError("cannot write " + path);
  return Status::Ok();
}

}  // namespace

Status WriteTestCertificates(const std::string& dir, const std::vector<std::string>& extra_names) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Status::IoError("create " + dir + ": " + ec.message());
  Key ca_key(EVP_EC_gen("P-256"));
  Key node_key(EVP_EC_gen("P-256"));
  Key client_key(EVP_EC_gen("P-256"));
  if (!ca_key || !node_key || !client_key) return Status::Internal("EC key generation failed");
  KVPORT_ASSIGN_OR_RETURN(
      Cert ca, MakeCertificate(ca_key.get(), "kvport test CA", nullptr, ca_key.get(),
                               {"basicConstraints", "critical,CA:TRUE", "keyUsage",
                                "critical,keyCertSign,cRLSign", "subjectKeyIdentifier", "hash"}));
  std::string names = "DNS:localhost,IP:127.0.0.1,IP:::1";
  for (const std::string& n : extra_names) {
    in6_addr v6;
    in_addr v4;
    const bool ip =
        ::inet_pton(AF_INET, n.c_str(), &v4) == 1 || ::inet_pton(AF_INET6, n.c_str(), &v6) == 1;
    names += (ip ? ",IP:" : ",DNS:") + n;
  }
  KVPORT_ASSIGN_OR_RETURN(
      Cert node, MakeCertificate(node_key.get(), "kvport node", ca.get(), ca_key.get(),
                                 {"basicConstraints", "critical,CA:FALSE", "subjectAltName", names,
                                  "extendedKeyUsage", "serverAuth,clientAuth"}));
  KVPORT_ASSIGN_OR_RETURN(
      Cert client,
      MakeCertificate(client_key.get(), "kvport client", ca.get(), ca_key.get(),
                      {"basicConstraints", "critical,CA:FALSE", "extendedKeyUsage", "clientAuth"}));
  KVPORT_RETURN_IF_ERROR(WritePem(dir + "/ca.pem", ca.get(), nullptr));
  KVPORT_RETURN_IF_ERROR(WritePem(dir + "/node.pem", node.get(), nullptr));
  KVPORT_RETURN_IF_ERROR(WritePem(dir + "/node.key", nullptr, node_key.get()));
  KVPORT_RETURN_IF_ERROR(WritePem(dir + "/client.pem", client.get(), nullptr));
  KVPORT_RETURN_IF_ERROR(WritePem(dir + "/client.key", nullptr, client_key.get()));
  return Status::Ok();
}

}  // namespace kvport::net
