// `autoaccel estimate`: will a strategy fit, and how fast will it go, on a
// cluster of a device type from the device catalog — answered offline by
// the cost model (search/estimate.h), no server. docs/CLI.md, "estimate".
//
// With --tokens (and a price: --price-per-gpu-hour or the catalog entry's),
// also the days and cost to train; with several --world-size or --device
// values (comma-separated), a sweep: each cluster's fastest option and safe
// pick, and with --deadline or --budget the cluster chosen for it.
//
// Exit codes: 0 answered (whether or not the strategy fits), 2 bad input
// (unreadable or invalid model config, unknown device, a bad catalog file,
// a strategy the space refuses, a bad token count, price, deadline or
// budget), 3 --top found no strategy that fits, or no cluster meets
// --deadline / --budget. With `json`, `out` receives exactly one JSON
// document; errors go to `err`.
#ifndef AUTOACCEL_CLIENT_ESTIMATE_COMMAND_H_
#define AUTOACCEL_CLIENT_ESTIMATE_COMMAND_H_

#include <CLI/CLI.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "client/commands.h"
#include "client/model_flags.h"
#include "search/estimate.h"

namespace autoaccel {

struct EstimateFlags {
  ModelFlags model;
  int seq_len = 0;
  int global_batch_size = 0;
  std::vector<int> world_sizes;      // --world-size W[,W...]; empty: 1
  std::vector<std::string> devices;  // --device NAME[,NAME...]
  int devices_per_node = 0;          // 0: the catalog's
  std::string strategy;              // canonical text; ga= may be left out
  int top = 0;
  std::string catalog_file;  // adds to / overrides the built-in catalog
  bool list_devices = false;
  std::vector<std::string> precisions;  // --precisions; empty: the default
  std::string tokens;                   // --tokens, e.g. "1T"; empty: no time or cost
  double price_per_gpu_hour = 0;        // 0: the catalog's
  std::string deadline;                 // --deadline, e.g. "30d"
  double budget = 0;
  double safe_margin = kDefaultSafeMargin;
};

// Adds the `estimate` subcommand, its flags bound to `*flags`.
CLI::App* AddEstimateCommand(CLI::App* app, EstimateFlags* flags);

int EstimateCommand(const EstimateFlags& flags, bool json, std::ostream& out, std::ostream& err);

}  // namespace autoaccel

#endif  // AUTOACCEL_CLIENT_ESTIMATE_COMMAND_H_
