import AttendanceCtlCore

await AttendanceCtl.main()
