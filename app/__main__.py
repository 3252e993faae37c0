import sys

if sys.argv[1:] == ["heartbeat-check"]:
    # A liveness probe runs it every period: the settings and app/heartbeat.py only, not the
    # whole command line's imports (a third of the time).
    from app.config import get_settings
    from app.heartbeat import check

    relay = get_settings().relay
    sys.exit(check(relay.heartbeat_dir, relay.heartbeat_max_age_s))

from app.cli import main

sys.exit(main())
