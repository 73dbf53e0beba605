"""The directory's reads: routing (queues, skills), users and teams, numbers, the balance.

A mixin of the `ContactCenterClient` facade (client.py): one short typed method per endpoint,
over the core's generic shapes (`_list_page`, `_list_all`, `_get_one`).
"""

from __future__ import annotations

from connectors.contact_center.core import ClientCore
from connectors.contact_center.responses import ListPage
from models.resources import Balance, CallerIdGroup, Number, Queue, Skill, Team, User


class DirectoryEndpoints(ClientCore):
    """GET endpoints of the organisation's directory, each as one page and as every page."""

    # --- routing -----------------------------------------------------------------------------

    async def list_queues(self, *, limit: int | None = None, offset: int = 0) -> ListPage[Queue]:
        """GET /routing/queues (one page)."""
        return await self._list_page("list_queues", Queue, limit=limit, offset=offset)

    async def list_all_queues(self) -> list[Queue]:
        """Every queue."""
        return await self._list_all("list_queues", Queue)

    async def get_queue(self, queue_id: int) -> Queue:
        """GET /routing/queues/{queue_id}."""
        return await self._get_one("get_queue", "queue", Queue, queue_id=queue_id)

    async def list_queue_users(
        self, queue_id: int, *, limit: int | None = None, offset: int = 0
    ) -> ListPage[User]:
        """GET /routing/queues/{queue_id}/users (one page)."""
        return await self._list_page(
            "list_queue_users", User, limit=limit, offset=offset, queue_id=queue_id
        )

    async def list_all_queue_users(self, queue_id: int) -> list[User]:
        """Every member of a queue."""
        return await self._list_all("list_queue_users", User, queue_id=queue_id)

    async def list_queue_supervisors(
        self, queue_id: int, *, limit: int | None = None, offset: int = 0
    ) -> ListPage[User]:
        """GET /routing/queues/{queue_id}/supervisors (one page)."""
        return await self._list_page(
            "list_queue_supervisors", User, limit=limit, offset=offset, queue_id=queue_id
        )

    async def list_all_queue_supervisors(self, queue_id: int) -> list[User]:
        """Every supervisor of a queue."""
        return await self._list_all("list_queue_supervisors", User, queue_id=queue_id)

    async def list_skills(self, *, limit: int | None = None, offset: int = 0) -> ListPage[Skill]:
        """GET /routing/skills (one page)."""
        return await self._list_page("list_skills", Skill, limit=limit, offset=offset)

    async def list_all_skills(self) -> list[Skill]:
        """Every skill."""
        return await self._list_all("list_skills", Skill)

    async def get_skill(self, skill_id: int) -> Skill:
        """GET /routing/skills/{skill_id}."""
        return await self._get_one("get_skill", "skill", Skill, skill_id=skill_id)

    # --- users and teams ---------------------------------------------------------------------

    async def list_users(
        self,
        *,
        limit: int | None = None,
        offset: int = 0,
        name: str | None = None,
        email: str | None = None,
        sip_account: str | None = None,
        security_access_group_id: int | None = None,
        extension: str | None = None,
        caller_id: str | None = None,
        timezone: str | None = None,
    ) -> ListPage[User]:
        """GET /users (one page), with the spec's filters."""
        filters = {
            "name": name,
            "email": email,
            "sip_account": sip_account,
            "security_access_group_id": security_access_group_id,
            "extension": extension,
            "caller_id": caller_id,
            "timezone": timezone,
        }
        return await self._list_page(
            "list_users", User, limit=limit, offset=offset, filters=filters
        )

    async def list_all_users(self, **filters: str | int | None) -> list[User]:
        """Every active user (filters as in `list_users`)."""
        return await self._list_all("list_users", User, filters=filters)

    async def get_user(self, user_id: str) -> User:
        """GET /users/{user_id}."""
        return await self._get_one("get_user", "user", User, user_id=user_id)

    async def list_deleted_users(
        self, *, limit: int | None = None, offset: int = 0, **filters: str | int | None
    ) -> ListPage[User]:
        """GET /users/deleted (one page); same filters as users except `extension`."""
        if "extension" in filters:
            raise ValueError("the deleted-users list has no extension filter")
        return await self._list_page(
            "list_deleted_users", User, limit=limit, offset=offset, filters=filters
        )

    async def list_all_deleted_users(self) -> list[User]:
        """Every deleted user."""
        return await self._list_all("list_deleted_users", User)

    async def get_deleted_user(self, user_id: str) -> User:
        """GET /users/deleted/{user_id}."""
        return await self._get_one("get_deleted_user", "user", User, user_id=user_id)

    async def list_teams(self, *, limit: int | None = None, offset: int = 0) -> ListPage[Team]:
        """GET /users/teams (one page)."""
        return await self._list_page("list_teams", Team, limit=limit, offset=offset)

    async def list_all_teams(self) -> list[Team]:
        """Every team."""
        return await self._list_all("list_teams", Team)

    async def get_team(self, team_id: int) -> Team:
        """GET /users/teams/{team_id}."""
        return await self._get_one("get_team", "team", Team, team_id=team_id)

    async def list_team_users(
        self, team_id: int, *, limit: int | None = None, offset: int = 0
    ) -> ListPage[User]:
        """GET /teams/{team_id}/users (one page; limit capped at 100). The spec also names
        /users/teams/{team_id}/users; the sandbox serves both, we use the endpoint section's."""
        return await self._list_page(
            "list_team_users", User, limit=limit, offset=offset, team_id=team_id
        )

    async def list_all_team_users(self, team_id: int) -> list[User]:
        """Every member of a team."""
        return await self._list_all("list_team_users", User, team_id=team_id)

    async def list_team_supervisors(
        self, team_id: int, *, limit: int | None = None, offset: int = 0
    ) -> ListPage[User]:
        """GET /teams/{team_id}/supervisors (one page); "exists likewise" per the spec."""
        return await self._list_page(
            "list_team_supervisors", User, limit=limit, offset=offset, team_id=team_id
        )

    async def list_all_team_supervisors(self, team_id: int) -> list[User]:
        """Every supervisor of a team."""
        return await self._list_all("list_team_supervisors", User, team_id=team_id)

    # --- numbers and billing -----------------------------------------------------------------

    async def list_numbers(self, *, limit: int | None = None, offset: int = 0) -> ListPage[Number]:
        """GET /numbers (one page; limit max 100). Purchased numbers only."""
        return await self._list_page("list_numbers", Number, limit=limit, offset=offset)

    async def list_all_numbers(self) -> list[Number]:
        """Every purchased number."""
        return await self._list_all("list_numbers", Number)

    async def list_caller_id_groups(
        self, *, limit: int | None = None, offset: int = 0
    ) -> ListPage[CallerIdGroup]:
        """GET /numbers/caller-id-groups (one page; limit capped at 100)."""
        return await self._list_page(
            "list_caller_id_groups", CallerIdGroup, limit=limit, offset=offset
        )

    async def list_all_caller_id_groups(self) -> list[CallerIdGroup]:
        """Every caller ID group."""
        return await self._list_all("list_caller_id_groups", CallerIdGroup)

    async def get_balance(self) -> Balance:
        """GET /billing/balance; the amount is an exact Decimal."""
        return await self._get_one("get_balance", "balance", Balance)
