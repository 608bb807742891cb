// `autoaccel estimate`: will a strategy fit, and how fast will it go, on a
// cluster of a device type from the device catalog — answered offline by
// the cost model (search/estimate.h), no server. docs/CLI.md, "estimate".
//
// Exit codes: 0 answered (whether or not the strategy fits), 2 bad input
// (unreadable or invalid model config, unknown device, a bad catalog file,
// a strategy the space refuses), 3 --top found no strategy that fits. With
// `json`, `out` receives exactly one JSON document; errors go to `err`.
#ifndef AUTOACCEL_CLIENT_ESTIMATE_COMMAND_H_
#define AUTOACCEL_CLIENT_ESTIMATE_COMMAND_H_

#include <CLI/CLI.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "client/commands.h"
#include "client/model_flags.h"

namespace autoaccel {

struct EstimateFlags {
  ModelFlags model;
  int seq_len = 0;
  int global_batch_size = 0;
  int world_size = 1;
  std::string device;
  int devices_per_node = 0;  // 0: the catalog's
  std::string strategy;      // canonical text; ga= may be left out
  int top = 0;
  std::string catalog_file;  // adds to / overrides the built-in catalog
  bool list_devices = false;
  std::vector<std::string> precisions;  // --precisions; empty: the default
};

// Adds the `estimate` subcommand, its flags bound to `*flags`.
CLI::App* AddEstimateCommand(CLI::App* app, EstimateFlags* flags);

int EstimateCommand(const EstimateFlags& flags, bool json, std::ostream& out, std::ostream& err);

}  // namespace autoaccel

#endif  // AUTOACCEL_CLIENT_ESTIMATE_COMMAND_H_
