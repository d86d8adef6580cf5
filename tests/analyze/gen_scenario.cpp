// Writes one synthetic scenario dump: gen_scenario NAME PATH (for update-goldens.sh and manual checks).
#include "scenarios.hpp"

#include <iostream>

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: gen_scenario NAME PATH\nscenarios:";
    for (auto& n : inferscope::testsupport::scenario_names()) std::cerr << " " << n;
    std::cerr << "\n";
    return 2;
  }
  try {
    inferscope::testsupport::write_scenario(argv[1], argv[2]);
  } catch (const std::exception& e) {
    std::cerr << "gen_scenario: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
