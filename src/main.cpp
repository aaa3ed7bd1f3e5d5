#include "cli/commands.h"

int main(int argc, char** argv) { return ig::cli::run_main(argc, argv); }
