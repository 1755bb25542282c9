import ArgumentParser
import AttendanceProtocol

// Registry values the command line takes as they are typed.

extension TimeOfDay: ExpressibleByArgument {
    /// `HH:MM`.
    public init?(argument: String) { self.init(argument) }
}

extension CalendarDate: ExpressibleByArgument {
    /// `YYYY-MM-DD`.
    public init?(argument: String) { self.init(argument) }
}
