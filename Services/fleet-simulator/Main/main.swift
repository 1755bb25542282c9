import FleetSimulatorService

// The root only dispatches: ArgumentParser's async `main()` refuses a root without an availability
// annotation on Linux, so parsing and running live in FleetSimulatorCommand.main(arguments:).
await FleetSimulatorCommand.main(arguments: Array(CommandLine.arguments.dropFirst()))
