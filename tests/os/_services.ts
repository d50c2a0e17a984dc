/** The services the adapter tests (tests/os/) and the service kind's (tests/resources/) run. */

/** A systemd unit of a service that sleeps. */
export const UNIT = "/etc/systemd/system/noxad-svc.service";
export const unitFile = (description: string): string =>
  `[Unit]\nDescription=${description}\n[Service]\nExecStart=/bin/sleep infinity\n` +
  `[Install]\nWantedBy=multi-user.target\n`;

/** An OpenRC script of a service that sleeps (/etc/init.d/noxad-svc). */
export const SCRIPT = `#!/sbin/openrc-run
description="noxad test service"
command=/bin/sleep
command_args=infinity
command_background=yes
pidfile=/run/noxad-svc.pid
retry=TERM/10
`;
