from clustergym.cli import main

raise SystemExit(main())
