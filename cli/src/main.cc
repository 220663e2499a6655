#include "commands.h"

int main(int argc, char** argv) { return pipetune::cli::Main(argc, argv); }
