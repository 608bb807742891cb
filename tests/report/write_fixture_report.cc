// Writes the HTML report of the canned job (tests/report/report_fixture.h)
// for the browser test: write_fixture_report OUT.html [--no-predictions]
// [--no-device-memory]. Exit 0, or 2 on bad arguments / an unwritable file.
#include <cstring>
#include <fstream>
#include <iostream>

#include "report/report_html.h"
#include "tests/report/report_fixture.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: write_fixture_report OUT.html [--no-predictions] [--no-device-memory]\n";
    return 2;
  }
  autoaccel::testing::FixtureOptions options;
  for (int i = 2; i < argc; ++i) {
    if (std::strcmp(argv[i], "--no-predictions") == 0) {
      options.predictions = false;
    } else if (std::strcmp(argv[i], "--no-device-memory") == 0) {
      options.device_memory = false;
    } else {
      std::cerr << "write_fixture_report: unknown flag " << argv[i] << "\n";
      return 2;
    }
  }
  std::ofstream out(argv[1], std::ios::binary | std::ios::trunc);
  out << autoaccel::ReportHtml(autoaccel::testing::FixtureReport(options));
  out.close();
  if (!out) {
    std::cerr << "write_fixture_report: cannot write " << argv[1] << "\n";
    return 2;
  }
  return 0;
}
