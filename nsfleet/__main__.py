try:
    from nsfleet.cli import main
except KeyboardInterrupt:  # Ctrl-C while the command line's modules load: no traceback
    raise SystemExit(130) from None

raise SystemExit(main())
