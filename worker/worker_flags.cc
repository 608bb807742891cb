#include "worker/worker_flags.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <iterator>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/local_address.h"
#include "worker/accelerators.h"

namespace autoaccel {

absl::StatusOr<std::vector<v1::Device>> ParseDevices(const std::string& text,
                                                     int64_t memory_bytes) {
  auto bad = [&] {
    return absl::InvalidArgumentError(absl::StrCat(
        "--devices: expected cpu:N (N CPU slots) or TYPE:0,1,... or TYPE:0-7 (TYPE one of ",
        AcceleratorTypeList(), ") — got '", text, "'"));
  };
  std::pair<std::string, std::string> kv = absl::StrSplit(text, absl::MaxSplits(':', 1));
  std::vector<v1::Device> devices;
  if (kv.first == "cpu") {
    int n = 0;
    if (!absl::SimpleAtoi(kv.second, &n) || n <= 0 || n > 1024) return bad();
    int64_t per_slot = memory_bytes;
    if (per_slot <= 0) {
      per_slot = static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGESIZE) / n;
    }
    for (int i = 0; i < n; ++i) {
      v1::Device d;
      d.set_type("cpu");
      d.set_index(i);
      d.set_memory_bytes(per_slot);
      d.set_name("cpu");
      devices.push_back(d);
    }
  } else if (FindAcceleratorType(kv.first) != nullptr) {
    std::vector<int> ordinals;
    for (absl::string_view part : absl::StrSplit(kv.second, ',')) {
      std::pair<absl::string_view, absl::string_view> range =
          absl::StrSplit(part, absl::MaxSplits('-', 1));
      int first = 0, last = 0;
      if (!absl::SimpleAtoi(range.first, &first) || first < 0) return bad();
      last = first;
      if (part.find('-') != absl::string_view::npos &&
          (!absl::SimpleAtoi(range.second, &last) || last < first || last - first >= 1024)) {
        return bad();
      }
      for (int i = first; i <= last; ++i) ordinals.push_back(i);
    }
    if (ordinals.size() > 1024) return bad();
    for (int ordinal : ordinals) {
      if (std::count(ordinals.begin(), ordinals.end(), ordinal) > 1) return bad();
      v1::Device d;
      d.set_type(kv.first);
      d.set_index(static_cast<int>(devices.size()));
      d.set_memory_bytes(memory_bytes);
      d.set_name(absl::StrCat(kv.first, ":", ordinal));
      d.set_ordinal(ordinal);
      devices.push_back(d);
    }
  } else {
    return bad();
  }
  if (devices.empty()) return bad();
  return devices;
}

absl::StatusOr<std::pair<int, int>> ParseRendezvousPorts(const std::string& text) {
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--rendezvous-ports: ", why, "; expected A-B with 1 <= A <= B <= 65535, got '", text, "'"));
  };
  std::pair<absl::string_view, absl::string_view> ab =
      absl::StrSplit(text, absl::MaxSplits('-', 1));
  int a = 0, b = 0;
  if (text.find('-') == std::string::npos ||
      !absl::SimpleAtoi(absl::StripAsciiWhitespace(ab.first), &a) ||
      !absl::SimpleAtoi(absl::StripAsciiWhitespace(ab.second), &b)) {
    return bad("not two port numbers");
  }
  if (a < 1 || b > 65535) return bad("a port out of range");
  if (a > b) return bad("the range is empty");
  return std::make_pair(a, b);
}

absl::StatusOr<PeakTflops> ParsePeakTflops(const std::string& text) {
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--peak-tflops: ", why,
        "; expected fp32=X,bf16=Y,fp16=Z,fp8=W (TFLOP/s, any of them), got '", text, "'"));
  };
  if (absl::StripAsciiWhitespace(text).empty()) return bad("empty");
  PeakTflops peak;
  bool seen[std::size(kPeakTflopsFields)] = {};
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    std::pair<absl::string_view, absl::string_view> kv =
        absl::StrSplit(part, absl::MaxSplits('=', 1));
    const absl::string_view key = absl::StripAsciiWhitespace(kv.first);
    int which = -1;
    for (size_t i = 0; i < std::size(kPeakTflopsFields); ++i) {
      if (kPeakTflopsFields[i].name == key) which = static_cast<int>(i);
    }
    if (which < 0) return bad(absl::StrCat("unknown precision '", key, "'"));
    if (seen[which]) return bad(absl::StrCat(key, " given twice"));
    seen[which] = true;
    double value = 0;
    if (!absl::SimpleAtod(absl::StripAsciiWhitespace(kv.second), &value) || !std::isfinite(value) ||
        value < 0) {
      return bad(absl::StrCat(key, ": expected a non-negative number"));
    }
    peak.*kPeakTflopsFields[which].member = value;
  }
  return peak;
}

std::string AdvertisedAddress(const std::string& listen, int port,
                              const std::string& advertise_host, const std::string& hostname) {
  std::string host = advertise_host;
  if (host.empty()) {
    const size_t colon = listen.rfind(':');
    host = colon == std::string::npos ? std::string() : listen.substr(0, colon);
    if (host.empty() || host == "0.0.0.0" || host == "::" || host == "[::]") host = hostname;
  }
  if (host.find(':') != std::string::npos && host.front() != '[')
    host = absl::StrCat("[", host, "]");
  return absl::StrCat(host, ":", port);
}

std::string AdvertisedAddressProblem(const std::string& address) {
  const size_t colon = address.rfind(':');
  const std::string host = colon == std::string::npos ? address : address.substr(0, colon);
  absl::StatusOr<std::string> local = LocalAddressToward(host);
  if (!local.ok()) return std::string(local.status().message());
  if (IsLoopbackHost(*local)) {
    return absl::StrCat("this host reaches ", host, " over loopback (", *local,
                        "), so ranks on other hosts cannot join gangs whose rank 0 runs here");
  }
  return "";
}

}  // namespace autoaccel
