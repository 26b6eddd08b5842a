from nsfleet.cli import main

raise SystemExit(main())
