// SPDX-License-Identifier: Apache-2.0
// TLS over kvport's non-blocking sockets (OpenSSL): TlsContext is one side's configuration,
// TlsSession one connection's TLS state.
//
// TLS 1.3 only. Kernel TLS offload is asked for on every session (SSL_OP_ENABLE_KTLS): where
// the kernel has the `tls` module and OpenSSL can hand it the cipher, records are encrypted (and,
// where supported, decrypted) by the kernel, so SSL_write passes a value's bytes straight to
// the socket instead of through a userspace record buffer; where it does not, OpenSSL does the
// crypto itself and nothing else changes. TlsSession::kernel_send()/kernel_receive() say which.
//
// OpenSSL types stay out of this header: only net/tls.cc includes OpenSSL.
#pragma once

#include <sys/uio.h>

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/thread_annotations.h"
#include "kvport/status.h"
#include "net/socket.h"

struct ssl_ctx_st;
struct ssl_st;

namespace kvport::net {

// PEM files. Which are needed depends on the role (TlsContext::Create).
struct TlsFiles {
  std::string cert_file;  // this side's certificate chain (leaf first)
  std::string key_file;   // its private key (not encrypted: there is no one to ask a passphrase)
  std::string ca_file;    // the CA certificates the peer's certificate must chain to
  // kClient: the node's certificate must name the host connected to (NewSession's
  // server_name). false accepts any certificate that chains to ca_file, whatever it names: for
  // nodes reached by addresses their certificates do not carry. With true, a session given no
  // name to check is refused rather than left unchecked.
  bool verify_hostname = true;
};

enum class TlsRole { kServer, kClient };

// What a handshake step left to do.
enum class TlsWait { kNone, kRead, kWrite };

class TlsSession;

// One side's TLS configuration. Thread-safe: sessions are made from any thread.
class TlsContext {
 public:
  // kServer: cert_file and key_file are required (the key must match the certificate);
  //   ca_file set means mutual TLS: a client must present a certificate that chains to it.
  // kClient: ca_file is required (the node's certificate is verified against it, and its
  //   name against the host connected to); cert_file + key_file, both or neither, are the
  //   client certificate for a node that asks for one.
  // The files are read by kvport, not opened by OpenSSL: each must be a regular file (a FIFO,
  // a device or a directory is refused at once instead of blocking the open or the read), a
  // symbolic link is followed (Kubernetes mounts secrets through links), and the key file must
  // give its group and other users no access (mode & 0077 == 0, as OpenSSH asks of a key).
  // Errors: InvalidArgument naming the file and what is wrong with it (missing, unreadable, not
  // a regular file, too open, not PEM, an encrypted key, key not matching the certificate).
  static Result<std::shared_ptr<TlsContext>> Create(TlsRole role, const TlsFiles& files);
  ~TlsContext();
  TlsContext(const TlsContext&) = delete;
  TlsContext& operator=(const TlsContext&) = delete;

  TlsRole role() const { return role_; }
  // kServer: clients must present a certificate (ca_file was given).
  bool requires_peer_certificate() const { return requires_peer_certificate_; }

  // A session over connected socket `fd` (borrowed: it must outlive the session). For a client,
  // `server_name` is the host connected to: sent as SNI (names only) and checked against the
  // node's certificate (a name, or an IP address in its subjectAltName); ignored by a server.
  // A client given no server_name fails here (InvalidArgument) unless verify_hostname is
  // false: with nothing to check, any certificate the CA signed would do.
  Result<std::unique_ptr<TlsSession>> NewSession(int fd, std::string_view server_name) const;

 private:
  TlsContext(TlsRole role, ssl_ctx_st* ctx, bool requires_peer_certificate, bool verify_hostname);
  TlsRole role_;
  ssl_ctx_st* ctx_;
  bool requires_peer_certificate_;
  bool verify_hostname_;
};

// One connection's TLS state over a non-blocking socket. Every method may be called from any
// thread: calls are serialized on an internal mutex (a client reads on one thread while another
// writes; OpenSSL's connection state is not thread-safe). None of them waits: each does what
// the socket allows now.
class TlsSession {
 public:
  ~TlsSession();
  TlsSession(const TlsSession&) = delete;
  TlsSession& operator=(const TlsSession&) = delete;

  // Advances the handshake: kNone once it is complete, else what the socket must become
  // (readable, writable) before the next call. Errors: PermissionDenied for a certificate that
  // fails verification (with OpenSSL's reason), Unavailable for anything else (the peer closed,
  // it does not speak TLS, no common protocol version).
  Result<TlsWait> Handshake() EXCLUDES(mu_);
  bool handshake_done() const EXCLUDES(mu_);

  // Reads decrypted bytes into the ranges, as much as is available now, with ReadV's meaning
  // (would_block: nothing more now; eof: the peer closed, with or without close_notify).
  Result<IoProgress> Read(const iovec* iov, int count) EXCLUDES(mu_);
  // Writes as much of the ranges as the socket accepts now, with WriteV's meaning. When it
  // reports would_block, the next call must start with the bytes it did not report written
  // (they may be encrypted and queued already): a queue that resumes where it stopped does.
  Result<IoProgress> Write(const iovec* iov, int count) EXCLUDES(mu_);
  // Decrypted bytes held in userspace: the socket (and epoll) will not report them.
  size_t buffered() const EXCLUDES(mu_);
  // Sends close_notify (best effort; the socket is non-blocking).
  void SendCloseNotify() EXCLUDES(mu_);

  // After the handshake: "TLSv1.3 TLS_AES_256_GCM_SHA384", and whether the kernel encrypts
  // (kernel_send) and decrypts (kernel_receive) this connection's records.
  std::string Describe() const EXCLUDES(mu_);
  bool kernel_send() const EXCLUDES(mu_);
  bool kernel_receive() const EXCLUDES(mu_);
  // The subject of the certificate the peer presented ("" if none).
  std::string PeerSubject() const EXCLUDES(mu_);
  // Server sessions: the names of the client certificate this session asked for and verified
  // in its handshake (its subject's commonName, then its DNS and URI subjectAltNames, each as
  // the certificate spells it); empty when it presented none, the session is a client's, or
  // the handshake has not completed.
  std::vector<std::string> PeerCertificateNames() const EXCLUDES(mu_);

 private:
  friend class TlsContext;
  explicit TlsSession(ssl_st* ssl);
  // Write() of one range; false with *blocked when the socket is full.
  Result<size_t> WriteOne(const void* data, size_t size, bool* blocked) REQUIRES(mu_);

  mutable Mutex mu_;
  ssl_st* ssl_ GUARDED_BY(mu_);
  bool handshake_done_ GUARDED_BY(mu_) = false;
  // Small ranges are gathered into one record (a frame header and its descriptor would
  // otherwise each cost a record and a system call). A write the socket did not take (gathered,
  // or the first record of a large range) must be offered again byte for byte, at least as
  // long: it stays here until it is accepted.
  std::string gather_ GUARDED_BY(mu_);
  bool gather_pending_ GUARDED_BY(mu_) = false;
};

// Whether the first byte the peer of `fd` sent opens a TLS handshake record (content type 22,
// what a TLS client sends first), looked at without consuming it: for a TLS listener to tell a
// client speaking in the clear. nullopt while nothing has arrived; Unavailable when the peer
// closed (or reset) before its first byte.
Result<std::optional<bool>> FirstByteOpensTls(int fd);

// Whether the kernel can offload TLS at all: the `tls` ULP is listed in
// /proc/sys/net/ipv4/tcp_available_ulp (it is loaded), for `kvport doctor` and the logs.
bool KernelTlsAvailable();

// Writes a throwaway CA and certificates signed by it into `dir` (created if missing), for tests,
// `kvport bench --tls` and trying TLS out: ca.pem, node.pem + node.key (subjectAltName:
// localhost, 127.0.0.1, ::1 and `extra_names`), client.pem + client.key (a client certificate).
// EC P-256 keys, valid for a day. Not a PKI: production certificates come from the operator's.
Status WriteTestCertificates(const std::string& dir, const std::vector<std::string>& extra_names);

}  // namespace kvport::net
