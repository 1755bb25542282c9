import AttendanceCtlCore

await AttendanceCtl.runAsRoot()
