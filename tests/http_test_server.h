// A small HTTP/1.1 file server on 127.0.0.1 for the `data get` tests: it serves the files of one folder,
// honours "Range: bytes=N-" (206 / 416) unless told not to, can break off the next response after a given
// number of body bytes (an interrupted download), and records every request line with its Range. One
// request per connection, served on a background thread; the port is chosen by the kernel.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace bastion::testing {

// Binds `fd` to 127.0.0.1 on a port the kernel chooses, and returns that port.
inline int bind_loopback(int fd) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address));
  socklen_t length = sizeof(address);
  getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  return ntohs(address.sin_port);
}

class HttpTestServer {
 public:
  explicit HttpTestServer(std::filesystem::path root) : root_(std::move(root)) {
    listener_ = socket(AF_INET, SOCK_STREAM, 0);
    port_ = bind_loopback(listener_);
    listen(listener_, 16);
    thread_ = std::thread([this] { serve(); });
  }
  ~HttpTestServer() {
    stop_ = true;
    thread_.join();
    close(listener_);
  }
  HttpTestServer(const HttpTestServer&) = delete;
  HttpTestServer& operator=(const HttpTestServer&) = delete;

  std::string url(const std::string& path = "") const { return "http://127.0.0.1:" + std::to_string(port_) + path; }
  // The next response sends its headers (with the full Content-Length) and only `bytes` of its body.
  void break_next_after(int64_t bytes) { break_after_ = bytes; }
  void ignore_ranges(bool ignore) { ignore_ranges_ = ignore; }
  // "GET /path" or "GET /path range=N-", one per request, in order.
  std::vector<std::string> requests() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return requests_;
  }

 private:
  void serve() {
    while (!stop_) {
      pollfd waiting{listener_, POLLIN, 0};
      if (poll(&waiting, 1, 50) <= 0) continue;
      const int client = accept(listener_, nullptr, nullptr);
      if (client < 0) continue;
      respond(client);
      close(client);
    }
  }

  static std::string read_head(int client) {
    std::string head;
    char c;
    while (head.find("\r\n\r\n") == std::string::npos && recv(client, &c, 1, 0) == 1) head += c;
    return head;
  }

  static void send_all(int client, const std::string& bytes) {
    size_t sent = 0;
    while (sent < bytes.size()) {
      const ssize_t n = send(client, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) return;
      sent += static_cast<size_t>(n);
    }
  }

  void respond(int client) {
    const std::string head = read_head(client);
    std::istringstream lines(head);
    std::string method, path;
    lines >> method >> path;
    int64_t from = -1;
    if (const size_t at = head.find("Range: bytes="); at != std::string::npos) from = std::stoll(head.substr(at + 13));
    {
      std::lock_guard<std::mutex> lock(mutex_);
      requests_.push_back(method + " " + path + (from >= 0 ? " range=" + std::to_string(from) + "-" : ""));
    }
    std::ifstream file(root_ / path.substr(1), std::ios::binary);
    if (!file) return send_all(client, "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
    const std::string body((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
    const int64_t size = static_cast<int64_t>(body.size());
    std::string status = "200 OK", extra;
    int64_t start = 0;
    if (from >= 0 && !ignore_ranges_) {
      if (from >= size)
        return send_all(client, "HTTP/1.1 416 Range Not Satisfiable\r\nContent-Range: bytes */" + std::to_string(size) +
                                    "\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
      status = "206 Partial Content";
      start = from;
      extra = "Content-Range: bytes " + std::to_string(from) + "-" + std::to_string(size - 1) + "/" +
              std::to_string(size) + "\r\n";
    }
    send_all(client, "HTTP/1.1 " + status + "\r\nContent-Length: " + std::to_string(size - start) + "\r\n" + extra +
                         "Connection: close\r\n\r\n");
    const int64_t stop_after = break_after_.exchange(-1);
    const int64_t length = stop_after >= 0 ? std::min(stop_after, size - start) : size - start;
    send_all(client, body.substr(static_cast<size_t>(start), static_cast<size_t>(length)));
  }

  std::filesystem::path root_;
  int listener_ = -1, port_ = 0;
  std::atomic<bool> stop_{false}, ignore_ranges_{false};
  std::atomic<int64_t> break_after_{-1};
  mutable std::mutex mutex_;
  std::vector<std::string> requests_;
  std::thread thread_;
};

// A port nothing listens on (bound by the kernel's choice, then released): a host that is "offline".
inline int closed_port() {
  const int probe = socket(AF_INET, SOCK_STREAM, 0);
  const int port = bind_loopback(probe);
  close(probe);
  return port;
}

}  // namespace bastion::testing
