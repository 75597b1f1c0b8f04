// One error vocabulary for the whole engine (STYLE.md §6).
// BASTION_CHECK(cond, parts...): a user-facing precondition. Throws bastion::Error whose message names
//   the file:line and whatever the caller streams in (shapes, values, file names).
// BASTION_ASSERT(cond): an internal invariant; a failure is a bug in Bastion, so it aborts.
// Library code never calls exit(): one process runs many clients and the CLI decides how to report.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <stdexcept>
#include <string>

namespace bastion {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The message without the " [path/file.cpp:123]" locations that BASTION_CHECK appends (one per rethrow):
// what the CLI shows a user unless BASTION_DEBUG=1 or --verbose asks for them. Brackets that are not a
// source location ("[attack.badnets]") stay.
std::string without_source_locations(const std::string& message);

// What a user is shown: the message without its source locations, or whole when BASTION_DEBUG=1 (the CLI's
// --verbose sets it). For the CLI's last line and for each failed run's line in a reproduce grid.
std::string message_for_user(const std::string& message);

namespace detail {
template <typename... Parts>
[[noreturn]] void throw_error(const char* file, int line, const Parts&... parts) {
  std::ostringstream message;
  (message << ... << parts);
  message << " [" << file << ":" << line << "]";
  throw Error(message.str());
}
}  // namespace detail

}  // namespace bastion

#define BASTION_CHECK(cond, ...)                                                  \
  do {                                                                            \
    if (!(cond)) ::bastion::detail::throw_error(__FILE__, __LINE__, __VA_ARGS__); \
  } while (0)

#define BASTION_FAIL(...) ::bastion::detail::throw_error(__FILE__, __LINE__, __VA_ARGS__)

#define BASTION_ASSERT(cond)                                                                    \
  do {                                                                                          \
    if (!(cond)) {                                                                              \
      std::fprintf(stderr, "bastion internal error: %s at %s:%d\n", #cond, __FILE__, __LINE__); \
      std::abort();                                                                             \
    }                                                                                           \
  } while (0)
