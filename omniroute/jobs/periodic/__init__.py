"""The periodic jobs, all in this folder: which there are and how often (`schedule`), what
each does (`tasks`), what every trigger calls (`runner`), the in-process trigger when there is
no RQ cron (`scheduler`), and their shared record of runs (`runs`)."""
