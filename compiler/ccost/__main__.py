from ccost.cli import main

raise SystemExit(main())
