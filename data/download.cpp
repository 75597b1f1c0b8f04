// `bastion data get`: see download.h. One file = fetch (resumable) -> size and SHA-256 check -> final
// name (or extraction). libcurl does HTTP, libcrypto the hash, libarchive the .tar.gz.
#include "data/download.h"

#include <archive.h>
#include <archive_entry.h>
#include <curl/curl.h>
#include <openssl/evp.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>

#include "data/idx.h"  // read_text_file
#include "tensor/error.h"
#include "tensor/file_io.h"

namespace bastion {

namespace fs = std::filesystem;

namespace {

// The published SHA-256 of each file is the one TensorFlow Datasets lists for the same URL
// (tensorflow_datasets/url_checksums/{mnist,fashion_mnist,cifar10,cifar100,svhn_cropped}.txt); MNIST's
// agree with ../shared/datasets/mnist/SOURCE.md. MNIST comes from the CVDF mirror TFDS uses: LeCun's own
// site no longer serves the files reliably.
const std::vector<DatasetSource>& sources() {
  static const std::vector<DatasetSource> table = {
      {"mnist",
       "mnist",
       {{"https://storage.googleapis.com/cvdf-datasets/mnist/train-images-idx3-ubyte.gz",
         "440fcabf73cc546fa21475e81ea370265605f56be210a4024d2ca8f203523609", 9912422},
        {"https://storage.googleapis.com/cvdf-datasets/mnist/train-labels-idx1-ubyte.gz",
         "3552534a0a558bbed6aed32b30c495cca23d567ec52cac8be1a0730e8010255c", 28881},
        {"https://storage.googleapis.com/cvdf-datasets/mnist/t10k-images-idx3-ubyte.gz",
         "8d422c7b0a1c1c79245a5bcf07fe86e33eeafee792b84584aec276f5a2dbc4e6", 1648877},
        {"https://storage.googleapis.com/cvdf-datasets/mnist/t10k-labels-idx1-ubyte.gz",
         "f7ae60f92e00ec6debd23a6088c31dbd2371eca3ffa0defaefb259924204aec6", 4542}},
       "MNIST: Y. LeCun, C. Cortes, C. Burges; cite LeCun et al. 1998"},
      {"fmnist",
       "fashion-mnist",
       {{"http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/train-images-idx3-ubyte.gz",
         "3aede38d61863908ad78613f6a32ed271626dd12800ba2636569512369268a84", 26421880},
        {"http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/train-labels-idx1-ubyte.gz",
         "a04f17134ac03560a47e3764e11b92fc97de4d1bfaf8ba1a3aa29af54cc90845", 29515},
        {"http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/t10k-images-idx3-ubyte.gz",
         "346e55b948d973a97e58d2351dde16a484bd415d4595297633bb08f03db6a073", 4422102},
        {"http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/t10k-labels-idx1-ubyte.gz",
         "67da17c76eaffca5446c3361aaab5c3cd6d1c2608764d35dfb1850b086bf8dd5", 5148}},
       "Fashion-MNIST: Zalando Research (MIT licence); cite Xiao, Rasul, Vollgraf 2017"},
      {"cifar10",
       "cifar10",
       {{"https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz",
         "c4a38c50a1bc5f3a1c5537f2155ab9d68f9f25eb1ed8d9ddda3db29a59bca1dd", 170052171, true}},
       "CIFAR-10: A. Krizhevsky, V. Nair, G. Hinton; cite Krizhevsky 2009"},
      {"cifar100",
       "cifar100",
       {{"https://www.cs.toronto.edu/~kriz/cifar-100-binary.tar.gz",
         "58a81ae192c23a4be8b1804d68e518ed807d710a4eb253b1f2a199162a40d8ec", 168513733, true}},
       "CIFAR-100: A. Krizhevsky, V. Nair, G. Hinton; cite Krizhevsky 2009"},
      {"svhn",
       "svhn",
       {{"http://ufldl.stanford.edu/housenumbers/train_32x32.mat",
         "435e94d69a87fde4fd4d7f3dd208dfc32cb6ae8af2240d066de1df7508d083b8", 182040794},
        {"http://ufldl.stanford.edu/housenumbers/test_32x32.mat",
         "cdce80dfb2a2c4c6160906d0bd7c68ec5a99d7ca4831afa54f09182025b6a75b", 64275384}},
       "SVHN: Y. Netzer et al.; non-commercial use; cite Netzer et al. 2011"},
  };
  return table;
}

// How to get the registered sets `data get` does not download (no checksum published for their URLs, or
// a package that already carries them).
std::string how_to_get(const std::string& name) {
  if (name == "wisdm" || name == "wisdm-features")
    return "get WISDM_ar_latest.tar.gz from https://www.cis.fordham.edu/wisdm/dataset.php and unpack it into "
           "DATA/wisdm/ (no published checksum to verify a download against)";
  if (name == "digits") return "it ships with Debian's python3-sklearn (data/README.md says where to copy it from)";
  if (name == "emnist" || name == "emnist-letters")
    return "get gzip.zip from https://www.nist.gov/itl/products-and-services/emnist-dataset and unpack it into "
           "DATA/emnist/";
  if (name == "tinyimagenet")
    return "get tiny-imagenet-200.zip from http://cs231n.stanford.edu/ and unpack it into DATA/";
  if (name == "synthetic") return "it is generated and has no files";
  return "it is not a registered dataset (bastion list datasets)";
}

std::string file_name_of(const std::string& url) { return url.substr(url.find_last_of('/') + 1); }

// Where a file is fetched from: its canonical URL, or MIRROR/<its file name>.
std::string source_url(const RemoteFile& file, const DownloadOptions& options) {
  return options.mirror.empty() ? file.url : options.mirror + "/" + file_name_of(file.url);
}

// "9.9 MB", or "29 kB" below a megabyte (0.0 MB would hide a small file's progress and size).
std::string mb(int64_t bytes) {
  std::ostringstream out;
  out << std::fixed;
  if (bytes < 1000000) {
    out.precision(0);
    out << static_cast<double>(bytes) / 1e3 << " kB";
  } else {
    out.precision(1);
    out << static_cast<double>(bytes) / 1e6 << " MB";
  }
  return out.str();
}

// ---- one HTTP transfer ----

struct CurlHandle {
  CURL* curl = curl_easy_init();
  ~CurlHandle() { curl_easy_cleanup(curl); }
};

struct Transfer {
  CURL* curl = nullptr;
  fs::path part;
  int64_t offset = 0, expected = 0;  // bytes already in the .part; the file's full size (0 = unknown)
  std::FILE* file = nullptr;         // opened at the first body byte, once the status says append or restart
  bool write_failed = false, progress = false;
  std::string label;
  std::chrono::steady_clock::time_point last_draw{};
};

// The first body byte tells whether the server honoured the Range: 206 appends, anything else restarts.
size_t write_body(char* data, size_t size, size_t count, void* user) {
  auto& t = *static_cast<Transfer*>(user);
  if (t.file == nullptr) {
    long status = 0;
    curl_easy_getinfo(t.curl, CURLINFO_RESPONSE_CODE, &status);
    const bool append = t.offset > 0 && status == 206;
    if (!append) t.offset = 0;
    t.file = std::fopen(t.part.c_str(), append ? "ab" : "wb");
    if (t.file == nullptr) {
      t.write_failed = true;
      return 0;
    }
  }
  const size_t written = std::fwrite(data, size, count, t.file);
  if (written != count) t.write_failed = true;
  return written * size;
}

int draw_progress(void* user, curl_off_t total, curl_off_t now, curl_off_t, curl_off_t) {
  auto& t = *static_cast<Transfer*>(user);
  const auto clock = std::chrono::steady_clock::now();
  if (!t.progress || clock - t.last_draw < std::chrono::milliseconds(200)) return 0;
  t.last_draw = clock;
  const int64_t done = t.offset + now, all = t.expected > 0 ? t.expected : t.offset + total;
  const int percent = all > 0 ? static_cast<int>(100 * done / all) : 0;
  const int bar = percent / 5;
  std::fprintf(stderr, "\r  %s [%s%s] %3d%% %s of %s ", t.label.c_str(), std::string(bar, '#').c_str(),
               std::string(20 - bar, '.').c_str(), percent, mb(done).c_str(), mb(all).c_str());
  return 0;
}

enum class Attempt { done, interrupted };

int64_t size_or_zero(const fs::path& path) {
  std::error_code ignored;
  const auto size = fs::file_size(path, ignored);
  return ignored ? 0 : static_cast<int64_t>(size);
}

// One attempt at the rest of `url` into `part`. Throws on what a retry cannot mend (offline, HTTP errors,
// a full disk); returns `interrupted` when the connection broke off.
Attempt fetch_once(const std::string& url, const fs::path& part, const RemoteFile& file,
                   const DownloadOptions& options) {
  CurlHandle handle;
  BASTION_CHECK(handle.curl != nullptr, "cannot start libcurl");
  Transfer t;
  t.curl = handle.curl;
  t.part = part;
  t.offset = size_or_zero(part);
  t.expected = file.bytes;
  t.progress = options.progress;
  t.label = file_name_of(url);
  char error[CURL_ERROR_SIZE] = {0};
  const std::string range = std::to_string(t.offset) + "-";
  curl_easy_setopt(handle.curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(handle.curl, CURLOPT_FOLLOWLOCATION, 1L);
  curl_easy_setopt(handle.curl, CURLOPT_FAILONERROR, 1L);
  curl_easy_setopt(handle.curl, CURLOPT_ERRORBUFFER, error);
  curl_easy_setopt(handle.curl, CURLOPT_CONNECTTIMEOUT, options.connect_timeout_s);
  curl_easy_setopt(handle.curl, CURLOPT_LOW_SPEED_LIMIT, 1L);  // a stalled transfer is an interrupted one
  curl_easy_setopt(handle.curl, CURLOPT_LOW_SPEED_TIME, 60L);
  curl_easy_setopt(handle.curl, CURLOPT_WRITEFUNCTION, write_body);
  curl_easy_setopt(handle.curl, CURLOPT_WRITEDATA, &t);
  curl_easy_setopt(handle.curl, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(handle.curl, CURLOPT_XFERINFOFUNCTION, draw_progress);
  curl_easy_setopt(handle.curl, CURLOPT_XFERINFODATA, &t);
  // CURLOPT_RANGE, not RESUME_FROM: a server that ignores the Range then sends the whole file (restarted
  // above), where RESUME_FROM would fail the transfer.
  if (t.offset > 0) curl_easy_setopt(handle.curl, CURLOPT_RANGE, range.c_str());
  const CURLcode code = curl_easy_perform(handle.curl);
  if (t.file != nullptr && std::fclose(t.file) != 0) t.write_failed = true;
  if (options.progress) std::fprintf(stderr, "\r%*s\r", 79, "");
  long status = 0;
  curl_easy_getinfo(handle.curl, CURLINFO_RESPONSE_CODE, &status);
  const std::string why = error[0] != '\0' ? error : curl_easy_strerror(code);
  BASTION_CHECK(!t.write_failed, "cannot write ", part.string(), " (disk full or not writable)");
  if (code == CURLE_OK) return Attempt::done;
  if (code == CURLE_HTTP_RETURNED_ERROR && status == 416 && t.offset > 0) return Attempt::done;  // nothing left
  if (code == CURLE_HTTP_RETURNED_ERROR) BASTION_FAIL("cannot get ", url, ": HTTP ", status);
  if (code == CURLE_COULDNT_RESOLVE_HOST || code == CURLE_COULDNT_CONNECT || code == CURLE_COULDNT_RESOLVE_PROXY)
    BASTION_FAIL("cannot reach ", url, " (", why, "): offline? Copy the files by hand or pass --mirror URL");
  return Attempt::interrupted;
}

// Fetches `file` into `part` (resuming what is there), retrying interrupted transfers.
void fetch(const RemoteFile& file, const fs::path& part, const DownloadOptions& options) {
  const std::string url = source_url(file, options);
  for (int attempt = 0;; ++attempt) {
    if (fetch_once(url, part, file, options) == Attempt::done) return;
    const int64_t have = size_or_zero(part);
    if (attempt >= options.retries)
      BASTION_FAIL("the download of ", url, " broke off at ", mb(have), file.bytes > 0 ? " of " + mb(file.bytes) : "",
                   " after ", attempt + 1, " attempt(s); the bytes so far are kept in ", part.string(),
                   ": run the same command again to resume");
    if (options.log) options.log("  " + file_name_of(url) + ": interrupted at " + mb(have) + ", resuming");
  }
}

// Refuses (and removes) a downloaded file whose size or SHA-256 is not the published one.
void verify_or_remove(const RemoteFile& file, const fs::path& part, const DownloadOptions& options) {
  const std::string url = source_url(file, options);
  const int64_t size = size_or_zero(part);
  const std::string digest = sha256_file(part.string());
  if ((file.bytes == 0 || size == file.bytes) && digest == file.sha256) return;
  std::error_code ignored;
  fs::remove(part, ignored);
  BASTION_FAIL("refused ", url, ": ", mb(size), " with sha256 ", digest, ", but the published file is ",
               file.bytes > 0 ? mb(file.bytes) + " with sha256 " : "sha256 ", file.sha256,
               " (removed; the source or the transfer changed it)");
}

// ---- .tar.gz extraction ----

struct ArchiveReader {
  archive* a = archive_read_new();
  ~ArchiveReader() { archive_read_free(a); }
};

// A member name that stays inside the folder: relative, without "..".
fs::path safe_member_path(const std::string& name, const fs::path& archive_path) {
  const fs::path path = fs::path(name).lexically_normal();
  bool safe = !name.empty() && path.is_relative();
  for (const auto& part : path) safe = safe && part != "..";
  BASTION_CHECK(safe, archive_path.string(), ": member '", name,
                "' would be written outside the dataset folder; refused");
  return path;
}

void extract_member(archive* a, const fs::path& out, const fs::path& archive_path) {
  fs::create_directories(out.parent_path());
  const fs::path temp = out.string() + ".part";
  std::ofstream stream(temp, std::ios::binary | std::ios::trunc);
  BASTION_CHECK(stream.good(), "cannot write ", temp.string());
  const void* block = nullptr;
  size_t size = 0;
  la_int64_t offset = 0;
  int status;
  while ((status = archive_read_data_block(a, &block, &size, &offset)) == ARCHIVE_OK)
    stream.write(static_cast<const char*>(block), static_cast<std::streamsize>(size));
  stream.close();
  BASTION_CHECK(status == ARCHIVE_EOF, archive_path.string(), ": cannot read '", out.filename().string(),
                "': ", archive_error_string(a));
  BASTION_CHECK(stream.good(), "cannot write ", temp.string(), " (disk full?)");
  fs::rename(temp, out);
}

// Extracts every regular file of a .tar.gz under `dest`; folders follow from the files' names, links and
// devices are skipped. Returns the number of files written.
int64_t extract_tar_gz(const fs::path& archive_path, const fs::path& dest) {
  ArchiveReader reader;
  archive_read_support_filter_gzip(reader.a);
  archive_read_support_format_tar(reader.a);
  BASTION_CHECK(archive_read_open_filename(reader.a, archive_path.c_str(), 1 << 16) == ARCHIVE_OK,
                archive_path.string(), ": not a readable .tar.gz: ", archive_error_string(reader.a));
  archive_entry* entry = nullptr;
  int64_t files = 0;
  int status;
  while ((status = archive_read_next_header(reader.a, &entry)) == ARCHIVE_OK) {
    if (archive_entry_filetype(entry) != AE_IFREG) continue;
    extract_member(reader.a, dest / safe_member_path(archive_entry_pathname(entry), archive_path), archive_path);
    ++files;
  }
  BASTION_CHECK(status == ARCHIVE_EOF, archive_path.string(), ": damaged archive: ", archive_error_string(reader.a));
  return files;
}

// ---- one file of a source ----

// A plain file: kept when already there with the published checksum; otherwise fetched and verified.
void get_plain_file(const RemoteFile& file, const fs::path& folder, const DownloadOptions& options) {
  const fs::path final_path = folder / file_name_of(file.url);
  if (fs::exists(final_path)) {
    const std::string digest = sha256_file(final_path.string());
    BASTION_CHECK(digest == file.sha256, final_path.string(), " is already there but its sha256 is ", digest,
                  ", not the published ", file.sha256, ": remove it and run again");
    if (options.log) options.log("  " + final_path.filename().string() + ": already there, sha256 ok");
    return;
  }
  const fs::path part = final_path.string() + ".part";
  fetch(file, part, options);
  verify_or_remove(file, part, options);
  fs::rename(part, final_path);
  if (options.log)
    options.log("  " + final_path.filename().string() + ": " + mb(size_or_zero(final_path)) + ", sha256 ok");
}

// An archive: its checksum, once extracted, is kept in ARCHIVE.sha256 beside the files, so a second run
// knows the files came from the published archive without keeping its 170 MB.
void get_archive(const RemoteFile& file, const fs::path& folder, const DownloadOptions& options) {
  const std::string name = file_name_of(file.url);
  const fs::path marker = folder / (name + ".sha256");
  if (fs::exists(marker) && read_text_file(marker.string()) == file.sha256 + "\n") {
    if (options.log) options.log("  " + name + ": extracted earlier from the published archive");
    return;
  }
  const fs::path part = folder / (name + ".part");
  fetch(file, part, options);
  verify_or_remove(file, part, options);
  const int64_t files = extract_tar_gz(part, folder);
  fs::remove(part);
  write_file_atomic(marker.string(), file.sha256 + "\n");
  if (options.log) options.log("  " + name + ": sha256 ok, " + std::to_string(files) + " files extracted");
}

}  // namespace

const DatasetSource& dataset_source(const std::string& name) {
  for (const DatasetSource& source : sources())
    if (source.dataset == name) return source;
  std::string valid;
  for (const std::string& n : downloadable_dataset_names()) valid += " " + n;
  BASTION_FAIL("`data get` cannot download '", name, "': ", how_to_get(name), ". It downloads:", valid);
}

std::vector<std::string> downloadable_dataset_names() {
  std::vector<std::string> names;
  for (const DatasetSource& source : sources()) names.push_back(source.dataset);
  return names;
}

std::string default_download_root() {
  const char* env = std::getenv("BASTION_DATA");
  return env != nullptr && *env != '\0' ? env : "./data";
}

std::string download_dataset(const DatasetSource& source, const std::string& root, const DownloadOptions& options) {
  static std::once_flag curl_ready;  // curl_global_init is not thread-safe: once, before any handle
  std::call_once(curl_ready, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  BASTION_CHECK(options.retries >= 0 && options.retries <= 100, "--retries must be in [0, 100], got ", options.retries);
  const fs::path folder = fs::path(root) / source.folder;
  fs::create_directories(folder);
  for (const RemoteFile& file : source.files) {
    if (file.unpack)
      get_archive(file, folder, options);
    else
      get_plain_file(file, folder, options);
  }
  return folder.string();
}

std::string sha256_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  BASTION_CHECK(in.good(), "cannot read ", path);
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> context(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  BASTION_CHECK(context && EVP_DigestInit_ex(context.get(), EVP_sha256(), nullptr) == 1, "cannot start SHA-256");
  std::vector<char> buffer(1 << 20);
  while (in) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    EVP_DigestUpdate(context.get(), buffer.data(), static_cast<size_t>(in.gcount()));
  }
  BASTION_CHECK(in.eof(), "cannot read ", path);
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_DigestFinal_ex(context.get(), digest, &length);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  for (unsigned int i = 0; i < length; ++i) {
    hex += kHex[digest[i] >> 4];
    hex += kHex[digest[i] & 15];
  }
  return hex;
}

}  // namespace bastion
