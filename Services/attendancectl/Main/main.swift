import AttendanceCtlCommands

await AttendanceCtl.runAsRoot()
