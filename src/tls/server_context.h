// Server-side TLS contexts for the webhook listener, with hot reload.
//
// Contract:
// - make_server_context() builds a boost::asio::ssl::context from PEM strings:
//   TLS 1.2 minimum (1.3 negotiated when the client offers it), AEAD ECDHE
//   ciphers only for TLS 1.2, no compression, no renegotiation, server
//   preference, ECDHE groups X25519/P-256/P-384, server-side session cache and
//   session tickets on (resumption works across connections sharing the
//   context). cert_pem may hold a chain (leaf first). The key must match the
//   leaf; otherwise an error saying which (unreadable certificate, unreadable
//   key, key does not match). Never throws.
// - Client authentication: with a non-empty client_ca_pem (one or more PEM
//   CA certificates) the context requires a client certificate that chains
//   to one of them (verify peer, fail if none; the CAs' names are sent as
//   the acceptable ones); a handshake without one, or with one from another
//   CA, fails. A client CA PEM without a certificate is an error.
// - Failures are ig::Result errors (base/result.h), never out-parameters.
// - ReloadingTlsContext holds the current context. current() is thread-safe and
//   cheap (a mutex-guarded shared_ptr copy). A connection keeps the context it
//   was accepted with for its whole life, so a reload never breaks an open
//   connection or an in-flight request.
// - For files, poll_for_changes() compares (device, inode, size, mtime) of the
//   watched files (certificate and key when loaded from files, the client CA
//   file when one is given, for both kinds) with the last seen ones; on a
//   change it re-reads them and swaps in a new context only if everything
//   parses and the key matches the certificate. A half-written or mismatched
//   set keeps the old context and is reported once per distinct file state
//   through the log callback ("error"); a successful reload is logged at
//   "info". start_watching() polls from a background thread (default every
//   second) until stop_watching() or destruction, which joins it.
// - replace_pem() swaps in new in-memory PEMs (self-managed certificates) under
//   the same rules, keeping the current client CA; it works for both kinds.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

#include <boost/asio/ssl/context.hpp>

#include "base/result.h"

namespace ig::tls {

// level is one of "debug", "info", "warn", "error".
using LogFn = std::function<void(std::string_view level, std::string_view msg)>;

Result<std::shared_ptr<boost::asio::ssl::context>> make_server_context(std::string_view cert_pem,
                                                                       std::string_view key_pem,
                                                                       std::string_view client_ca_pem = {});

class ReloadingTlsContext {
 public:
  // Loads both files now (and client_ca_path, when not empty); an error
  // naming the files when they are unreadable, unparsable or do not match.
  static Result<std::unique_ptr<ReloadingTlsContext>> from_files(std::string cert_path,
                                                                 std::string key_path, LogFn log,
                                                                 std::string client_ca_path = {});
  // In-memory PEMs; poll_for_changes() watches only client_ca_path (if any).
  static Result<std::unique_ptr<ReloadingTlsContext>> from_pem(std::string_view cert_pem,
                                                               std::string_view key_pem, LogFn log,
                                                               std::string client_ca_path = {});

  ~ReloadingTlsContext();
  ReloadingTlsContext(const ReloadingTlsContext&) = delete;
  ReloadingTlsContext& operator=(const ReloadingTlsContext&) = delete;

  // The context new connections should use. Never null.
  std::shared_ptr<boost::asio::ssl::context> current() const;

  // Watched files only: true when a new context was swapped in by this call.
  bool poll_for_changes();

  // Swaps in a context built from these PEMs; an error (old context kept,
  // error logged) when they do not parse or match.
  Result<void> replace_pem(std::string_view cert_pem, std::string_view key_pem);

  // Starts the background poll thread (when a file is watched; idempotent).
  void start_watching(std::chrono::milliseconds interval = std::chrono::seconds(1));
  void stop_watching();

  // Number of successful reloads since construction (the initial load is 0).
  std::uint64_t reload_count() const { return reloads_.load(std::memory_order_relaxed); }
  // notAfter of the current leaf certificate.
  std::chrono::system_clock::time_point not_after() const;
  // PEM of the current certificate (chain) as loaded.
  std::string certificate_pem() const;

 private:
  struct FileState {
    unsigned long long dev = 0, ino = 0, size = 0;
    long long mtime_ns = 0;
    bool exists = false;
    bool operator==(const FileState&) const = default;
  };
  ReloadingTlsContext(std::string cert_path, std::string key_path, std::string client_ca_path, LogFn log);
  static FileState stat_file(const std::string& path);
  bool watches_files() const { return !cert_path_.empty() || !client_ca_path_.empty(); }
  Result<void> install(std::string_view cert_pem, std::string_view key_pem, std::string_view client_ca_pem);
  void log(std::string_view level, const std::string& msg) const;
  void watch_loop(std::chrono::milliseconds interval);

  const std::string cert_path_, key_path_;  // empty for in-memory
  const std::string client_ca_path_;        // empty: no client authentication
  const LogFn log_;

  mutable std::mutex mu_;  // guards ctx_, not_after_, cert_pem_, key_pem_, client_ca_pem_
  std::shared_ptr<boost::asio::ssl::context> ctx_;
  std::chrono::system_clock::time_point not_after_{};
  std::string cert_pem_, key_pem_, client_ca_pem_;

  std::mutex poll_mu_;  // serialises polls; guards the file states
  FileState seen_cert_, seen_key_, seen_ca_;  // state of the files currently loaded / last tried
  std::atomic<std::uint64_t> reloads_{0};

  std::mutex watch_mu_;  // guards watcher_, stop_
  std::condition_variable watch_cv_;
  bool stop_ = false;
  std::thread watcher_;
};

}  // namespace ig::tls
