// Getting a dataset's files from the web: `bastion data get NAME` (issue 40).
// - Each file comes from its canonical source (or a mirror) over libcurl, into FILE.part beside its final
//   name; an interrupted transfer keeps the .part and the next attempt (a retry, or the same command run
//   again) asks only for the missing bytes (an HTTP Range request).
// - Every downloaded file is checked against its SHA-256 before it takes its final name. A file whose
//   checksum differs is refused and removed: the source changed or the bytes were damaged, and a dataset
//   that is not the published one would make every result that reads it wrong without a word.
// - A .tar.gz (CIFAR's binary versions) is checked as a whole, then its regular files are extracted into
//   the dataset's folder (libarchive; names that would leave the folder are refused), then it is deleted.
// The checksums are the ones TensorFlow Datasets publishes for the same URLs (data/README.md, "Getting the
// data"); sets without a published checksum (WISDM, EMNIST, TinyImageNet, the scikit-learn digits) are
// not downloaded, and `dataset_source` says where to get them instead.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace bastion {

struct RemoteFile {
  std::string url;      // the canonical source
  std::string sha256;   // of the file as downloaded: 64 lower-case hex digits
  int64_t bytes = 0;    // its size (for the progress bar and the size check); 0 = not known
  bool unpack = false;  // a .tar.gz: its members are extracted into the folder, then it is deleted
};

struct DatasetSource {
  std::string dataset;  // the registered name (data/dataset.h)
  std::string folder;   // under the data root: the first folder the loader looks in (or its parent for archives)
  std::vector<RemoteFile> files;
  std::string citation;  // printed after a download: the set's authors ask for it
};

// The source of a registered set. Throws for a set that cannot be downloaded, saying how to get it
// (Fashion-MNIST also comes from Debian's dataset-fashion-mnist).
const DatasetSource& dataset_source(const std::string& name);
std::vector<std::string> downloadable_dataset_names();

// Where `data get` puts a set without --data-dir: $BASTION_DATA when set, else ./data (both are searched
// by the loaders; /usr/share/datasets belongs to Debian's packages).
std::string default_download_root();

struct DownloadOptions {
  std::string mirror;  // "": canonical URLs; else each file is fetched from MIRROR/<its file name>
  int retries = 2;     // further attempts, each resuming, after an interrupted transfer
  long connect_timeout_s = 20;
  bool progress = false;                        // a progress bar on stderr (the CLI turns it on for a terminal)
  std::function<void(const std::string&)> log;  // one line per file: fetched, verified, extracted
};

// Fetches every file of `source` into root/source.folder, verifying each, and returns that folder. Files
// already there with the right checksum are kept (so a second `data get` only verifies). Throws, in one
// line naming the URL: an unreachable host (offline), an HTTP error, an interrupted transfer after the
// retries (the .part stays for the next run), a checksum or size mismatch (the file is removed), an
// archive that cannot be read or names a path outside the folder.
std::string download_dataset(const DatasetSource& source, const std::string& root, const DownloadOptions& options);

// SHA-256 of a file, as 64 lower-case hex digits (OpenSSL's libcrypto). Throws when it cannot be read.
std::string sha256_file(const std::string& path);

}  // namespace bastion
