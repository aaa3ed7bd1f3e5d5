// tests/apiserver/fake_apiserver.py as a subprocess of a unit test, over
// real TLS, steered through its control API (its README lists the methods):
// shared by the tests of the API client, the Event recorder, leader election
// and the certificates.
//
// Contract: start() writes the certificate and key into `dir`, spawns the
// server on free ports and waits (at most 30 s) for its port files; nullptr
// with *error set when it cannot. The destructor SIGTERMs it (SIGKILL after
// 5 s). control() POSTs one method and returns its "result", or records a
// test failure and returns null. Every socket wait is bounded (30 s).
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#ifndef IG_SOURCE_DIR
#error "IG_SOURCE_DIR must name the source tree"
#endif

extern char** environ;

namespace ig::test_support {

inline std::string read_whole_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

class FakeApiServer {
 public:
  using json = nlohmann::json;
  // Starts it on `dir` (certificate, key, token and port files there).
  static std::unique_ptr<FakeApiServer> start(const std::string& dir, const std::string& cert_pem,
                                              const std::string& key_pem, const std::string& token_file,
                                              std::string* error) {
    auto s = std::unique_ptr<FakeApiServer>(new FakeApiServer);
    const std::string cert = dir + "/tls.crt", key = dir + "/tls.key";
    const std::string port_file = dir + "/port", control_file = dir + "/control-port";
    const std::string log = dir + "/server.log";
    std::ofstream(cert) << cert_pem;
    std::ofstream(key) << key_pem;
    std::filesystem::remove(port_file);
    std::filesystem::remove(control_file);
    const std::string script = std::string(IG_SOURCE_DIR) + "/tests/apiserver/fake_apiserver.py";
    std::vector<std::string> args = {"/usr/bin/python3", script,         "--tls-cert",  cert,
                                     "--tls-key",        key,            "--port",      "0",
                                     "--port-file",      port_file,      "--control-port", "0",
                                     "--control-port-file", control_file, "--bookmark-interval", "0.2"};
    if (!token_file.empty()) {
      args.push_back("--token-file");
      args.push_back(token_file);
    }
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    const int rc = posix_spawn(&s->pid_, argv[0], &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) {
      *error = "posix_spawn: " + std::to_string(rc);
      s->pid_ = -1;
      return nullptr;
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (std::chrono::steady_clock::now() < deadline) {
      const std::string p = read_whole_file(port_file), c = read_whole_file(control_file);
      if (!p.empty() && !c.empty()) {
        s->port_ = std::stoi(p);
        s->control_port_ = std::stoi(c);
        return s;
      }
      int status = 0;
      if (::waitpid(s->pid_, &status, WNOHANG) == s->pid_) {
        s->pid_ = -1;
        *error = "the test API server exited: " + read_whole_file(log);
        return nullptr;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    *error = "the test API server did not write its ports within 30 s: " + read_whole_file(log);
    return nullptr;
  }

  ~FakeApiServer() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGTERM);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    int status = 0;
    while (::waitpid(pid_, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, &status, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }

  std::string url() const { return "https://127.0.0.1:" + std::to_string(port_); }
  int port() const { return port_; }

  // POST /<method> on the control API; the "result", or a test failure.
  json control(const std::string& method, const json& kwargs = json::object()) {
    std::lock_guard lock(mu_);
    const std::string body = kwargs.dump();
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return failed(method, "socket");
    timeval tv{30, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(control_port_));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      ::close(fd);
      return failed(method, "connect");
    }
    const std::string req = "POST /" + method + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
                            "Content-Type: application/json\r\nContent-Length: " +
                            std::to_string(body.size()) + "\r\n\r\n" + body;
    std::size_t sent = 0;
    while (sent < req.size()) {
      const ssize_t n = ::send(fd, req.data() + sent, req.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) break;
      sent += static_cast<std::size_t>(n);
    }
    std::string answer;
    char buf[65536];
    for (;;) {
      const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) break;
      answer.append(buf, static_cast<std::size_t>(n));
    }
    ::close(fd);
    const auto head_end = answer.find("\r\n\r\n");
    if (head_end == std::string::npos) return failed(method, "no answer");
    const json doc = json::parse(answer.substr(head_end + 4), nullptr, false);
    if (doc.is_discarded() || !doc.contains("result")) return failed(method, answer.substr(0, 2000));
    return doc["result"];
  }

 private:
  FakeApiServer() = default;
  json failed(const std::string& method, const std::string& why) {
    ADD_FAILURE() << "control " << method << ": " << why;
    return json();
  }

  pid_t pid_ = -1;
  int port_ = 0;
  int control_port_ = 0;
  std::mutex mu_;
};

}  // namespace ig::test_support
