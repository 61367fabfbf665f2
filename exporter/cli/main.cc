// `exporter`: see exporter/cli/cli.h.
#include <iostream>

#include "exporter/cli/cli.h"

int main(int argc, char** argv) { return ember::exporter::run_cli(argc, argv, std::cout, std::cerr); }
